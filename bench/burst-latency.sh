#!/usr/bin/env bash
# P1, reaction: the time from a burst of 20 jobs being enqueued to the first
# new worker being active, with the default 5 s poll, per source: with
# event-driven wake-up (inotify for flexiq-sqlite, keyspace notifications
# for flexiq-redis and bullmq, LISTEN for River and graphile-worker), and
# with polling alone for flexiq-sqlite and flexiq-redis, measured against
# the real daemon and real servers in the systemd sandbox. Prints the
# median and the max of each (s-median, s-max) for
# BurstToFirstWorker/SOURCE/MODE. Target with wake-up: a median under 1 s.
# Run as root from the repository root, under the sandbox lock where
# others share the machine.
#   bench/burst-latency.sh [BURSTS] [SOURCE-REGEX]
#   (default 20 bursts per source and mode; every source)
# e.g. bench/burst-latency.sh 20 'flexiq-redis/'
set -euo pipefail
go=$(scripts/ensure-go.sh)
"$go" test -count=1 -run '^$' -bench "BurstToFirstWorker/${2:-}" -benchtime "${1:-20}x" -timeout 60m ./test/e2e/
