#!/usr/bin/env bash
# P1, reaction: the time from a burst landing in a flexiq-sqlite queue
# database to the first new worker being active, with the default 5 s poll,
# with event-driven wake-up (inotify) and with polling alone, measured against
# the real daemon in the systemd sandbox. Prints the median and the max of
# each (s-median, s-max). Target with wake-up: a median under 1 s.
# Run as root from the repository root.
#   bench/burst-latency.sh [BURSTS]   (default 20 per mode)
set -euo pipefail
go=$(scripts/ensure-go.sh)
"$go" test -count=1 -run '^$' -bench BurstToFirstWorker -benchtime "${1:-20}x" -timeout 60m ./test/e2e/
