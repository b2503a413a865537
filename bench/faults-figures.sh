#!/usr/bin/env bash
# The fault-injection suite's figures, for docs/reliability.md's table.
#
#   bench/faults-figures.sh [RUNS]        run test/faults RUNS times (default 1)
#   bench/faults-figures.sh --log FILE    only read a log, e.g. bin/faults.log
#
# Each run's full log is kept in bin/faults-run-N.log. The FIGURE lines are
# printed grouped by fault, one line per run, so that the spread between runs
# (the timings depend on the machine's load) is visible next to the table.
# Run as root from the repository root; a run takes about five minutes.
set -euo pipefail
logs=()
if [[ ${1:-} == --log ]]; then
	logs=("$2")
else
	runs=${1:-1}
	mkdir -p bin
	for i in $(seq "$runs"); do
		log=bin/faults-run-$i.log
		echo "run $i/$runs -> $log" >&2
		# A failing test still reports its figures: keep going.
		go test -count=1 -v -timeout 20m ./test/faults/ >"$log" 2>&1 || echo "run $i: some tests failed (see $log)" >&2
		logs+=("$log")
	done
fi
for log in "${logs[@]}"; do
	grep -o 'FIGURE fault=.*' "$log" | sed "s|^FIGURE |$(basename "$log" .log) |"
done | sort -s -k2,2 | awk '{split($2, f, "="); if (f[2] != last) {print "\n" f[2] ":"; last = f[2]} $2 = ""; print "  " $0}'
