#!/usr/bin/env bash
# Prints the path of a Go toolchain that can build this module, installing
# one if needed. Only the path goes to stdout; progress goes to stderr.
#
# Go >= 1.21 fetches the exact toolchain that go.mod asks for by itself
# (GOTOOLCHAIN=auto). Debian 12's own golang-go is 1.19, too old for that, so
# on a fresh machine it is used once to download the toolchain module from the
# Go module proxy.
set -euo pipefail
want=$(awk '/^go /{print $2; exit}' "$(dirname "$0")/../go.mod")

usable() { # a go binary >= 1.21
	local v
	v=$("$1" env GOVERSION 2>/dev/null) || return 1
	v=${v#go}
	[ "$(printf '%s\n' 1.21 "$v" | sort -V | head -1)" = 1.21 ]
}

for g in "${GO:-}" "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go/bin/go; do
	if [ -n "$g" ] && [ -x "$g" ] && usable "$g"; then
		echo "$g"
		exit 0
	fi
done

arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
mod="golang.org/toolchain@v0.0.1-go${want}.linux-${arch}"
modcache=${GOMODCACHE:-$HOME/go/pkg/mod}
bin="$modcache/golang.org/toolchain@v0.0.1-go${want}.linux-${arch}/bin/go"
if [ ! -x "$bin" ]; then
	echo "ensure-go: installing Debian's golang-go to fetch go${want} from the module proxy" >&2
	if ! command -v go >/dev/null; then
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go ca-certificates >&2
	fi
	tmp=$(mktemp -d)
	(cd "$tmp" && GOMODCACHE=$modcache GOFLAGS=-modcacherw GO111MODULE=on go mod download "$mod") >&2
	rm -rf "$tmp"
	# Module zips carry no exec bits.
	chmod +x "$(dirname "$bin")"/* "$modcache/golang.org/toolchain@v0.0.1-go${want}.linux-${arch}/pkg/tool/"*/*
fi
echo "$bin"
