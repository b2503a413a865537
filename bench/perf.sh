#!/usr/bin/env bash
# The performance figures of issue 11, with their targets (`make bench`):
#   P1 reaction: a burst's insert to the first new worker active, with
#      wake-up and with polling alone (bench/burst-latency.sh's benchmark);
#   P2 scale-out: 0 -> 500 workers, ours against PID 1's own floor (the
#      same 500 units requested at once on one D-Bus connection), with a
#      sequential systemd-run loop beside them (BenchmarkScaleOut);
#   P3 tick cost: daemon and PID 1 CPU per tick and the daemon's RSS at 500
#      idle workers and a 5 s poll (BenchmarkTickCost): its anonymous RSS
#      (RssAnon, target 12 MB since issue 18) beside the total, which is
#      mostly the binary's own clean pages and has no target.
# All against the real daemon in the systemd sandbox; every figure is a
# median over repeated runs. Run as root from the repository root (about
# 15 minutes with the defaults). Settings:
#   BURSTS=10          bursts per P1 mode
#   P1_SOURCES='flexiq-sqlite|flexiq-redis'   sources for P1 (a regex of
#                      sub-benchmark names; bench/burst-latency.sh has them all)
#   ROUNDS=5           rounds of P2 and of P3
# The raw benchmark output is kept in bin/bench.log.
set -euo pipefail
cd "$(dirname "$0")/.."
go=$(scripts/ensure-go.sh)
log=bin/bench.log
mkdir -p bin
: >"$log"
run() { "$go" test -count=1 -run '^$' -timeout 90m "$@" 2>&1 | tee -a "$log"; }

# go test splits -bench at each slash: one pattern per level.
run -bench "BurstToFirstWorker/^(${P1_SOURCES:-flexiq-sqlite|flexiq-redis})\$/" -benchtime "${BURSTS:-10}x" ./test/e2e/
FLEXIQ_BENCH_ROUNDS=${ROUNDS:-5} run -bench 'ScaleOut|TickCost' -benchtime 1x ./test/e2e/

# metric UNIT LINE: the value printed before UNIT on a benchmark line.
echo
echo "=== issue 11: measured in the systemd sandbox ($(nproc) cores), medians"
awk '
function metric(unit,   i) { for (i = 3; i < NF; i++) if ($(i+1) == unit) return $i; return "?" }
/^BenchmarkBurstToFirstWorker\// {
	split($1, p, "/"); mode = p[3]; sub(/-[0-9]+$/, "", mode)
	printf "P1 reaction  %-14s %-5s median %6.2f s  max %6.2f s  (target with wake-up: median under 1 s)\n", p[2], mode, metric("s-median"), metric("s-max")
}
/^BenchmarkScaleOut/ {
	printf "P2 scale-out 0 -> 500: ours %.2f s, PID 1 floor %.2f s, ratio %.2f (target at most 1.20); sequential systemd-run %.2f s\n", metric("ours-s"), metric("floor-s"), metric("ratio"), metric("seq-s")
}
/^BenchmarkTickCost/ {
	printf "P3 tick at 500 idle workers, 5 s poll: daemon %.1f ms (target 10), PID 1 %.1f ms (target 10), daemon RSS anonymous %.1f MB (target 12) of %.1f MB in all\n", metric("daemon-ms/tick"), metric("pid1-ms/tick"), metric("rss-anon-MB"), metric("rss-MB")
}' "$log"
