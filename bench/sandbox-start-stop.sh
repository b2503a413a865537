#!/usr/bin/env bash
# Median wall time of a sandbox `start` plus `stop`, over N runs (default 11).
# Run as root from the repository root after `make build`.
set -euo pipefail
n=${1:-11}
times=()
for i in $(seq "$n"); do
	t0=$(date +%s%N)
	bin/flexiq-sandbox start bench >/dev/null
	bin/flexiq-sandbox stop bench
	times+=("$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN{printf "%.3f", (b-a)/1e9}')")
done
printf '%s\n' "${times[@]}" | sort -n | awk -v n="$n" '{a[NR]=$1} END {printf "sandbox start+stop over %d runs: median %.2fs, min %.2fs, max %.2fs\n", n, a[int((n+1)/2)], a[1], a[n]}'
