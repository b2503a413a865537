#!/usr/bin/env bash
# Installs the Debian packages that building and testing need, if missing:
# the distro's systemd and D-Bus (booted inside the test sandbox, never on
# the host), util-linux's nsenter, iproute2's ip and tc (the bridge and
# veths that join the fleet tests' sandboxes), iptables (the NFQUEUE rule,
# in a sandbox's own namespace, that delays its link where the kernel has
# no netem), the package tools, and the queue servers
# (Redis, PostgreSQL, Prometheus) and nginx and HAProxy, the load balancers of the
# service-pool tests, that run inside the sandbox too, and
# stress-ng, the load generator the host guard is tested against, and
# gunicorn, a real server on a socket that systemd passes (internal/units).
set -euo pipefail
need=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# The queue servers the sources are tested against (test/servers starts
# them inside the sandbox, never on the host).
for p in systemd dbus util-linux iproute2 iptables dpkg-dev lintian ca-certificates redis-server redis-tools postgresql prometheus nginx haproxy curl stress-ng gunicorn; do
	have "$p" || need+=("$p")
done
# Node.js and npm run the queue systems' own clients (BullMQ, pg-boss,
# graphile-worker) that the source tests enqueue through. Any node will do:
# Debian's, or one already installed.
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "deps: missing packages ${need[*]}; run as root or install them" >&2
		exit 1
	fi
	echo "deps: installing ${need[*]}" >&2
	# The packages' own services (dbus above all) must not start on this
	# host: systemd and D-Bus only ever run inside the sandbox. A policy-rc.d
	# that says no does that for the install, unless one is already there.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 0755 /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
