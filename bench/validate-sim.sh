#!/usr/bin/env bash
# Validates simulate --workload against the real thing (issue 11): replays
# the demo's trace window in the sandbox (the .deb, the real systemd, the
# test workers on a flexiq SQLite database; test/demo) and in the model, with
# the same settings, and prints both: worker-seconds must agree within 10%,
# the p95 wait within 20%.
#
# Needs root, like `make demo`, and boots a sandbox, which waits for the
# machine's sandbox lock (test/sandbox/lock.go) while another suite runs; the
# builds run outside it. RUNS sandbox replays (default 3); the median is compared.
# STARTUP is the model's worker startup in wall seconds (default 0.2: a test
# worker's process start, its database open and its first 50 ms poll). The
# model has the daemon's wake-up on (--wake 0.25): the demo's flexiq-sqlite
# source wakes the pool on every write, so it ticks up to four times a
# second while jobs move, not once a second. REUSE=1 compares the model with
# the sandbox logs of the last run instead of booting the sandbox again.
#
# The demo's settings (test/demo/main.go): the Azure LLM code trace 2023
# window (CC-BY 4.0, see test/demo/README.md) at 10x, service time
# (500 ms + 10 ms x GeneratedTokens) / 10, min 1, max 8 workers, 2 threads
# each, target depth 10, scale-down window 12 s, poll 1 s, 3 s lead-in.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
RUNS=${RUNS:-3}
STARTUP=${STARTUP:-0.2}
out=bin/validate-sim
mkdir -p "$out"

$GO build -o "$out/flexiq-scaled" ./cmd/flexiq-scaled
if [[ ${REUSE:-} != 1 ]]; then
	make -s deb >/dev/null
	$GO build -o bin/flexiq-demo ./test/demo
	deb=$(ls -t dist/flexiq-scaled_*_"$(dpkg --print-architecture)".deb | head -n 1)
fi

# The model: the window as the demo plays it, in wall time.
python3 - test/demo/azure-llm-code-2023-window.csv >"$out/window.csv" <<'PY'
import csv, sys
from datetime import datetime
rows = list(csv.DictReader(open(sys.argv[1])))
ts = [datetime.strptime(r["TIMESTAMP"][:26], "%Y-%m-%d %H:%M:%S.%f") for r in rows]
t0 = min(ts)
print("arrival,service")
for t, r in sorted(zip(ts, rows), key=lambda x: x[0]):
    # test/demo/trace.go ServiceMs: max(1, round((500 + 10 g) / 10)) ms.
    ms = max(1, int((500 + 10 * int(r["GeneratedTokens"])) / 10 + 0.5))
    print("%.6f,%.3f" % ((t - t0).total_seconds() / 10, ms / 1000))
PY
cat >"$out/demo.toml" <<'TOML'
[daemon]
poll_interval_sec = 1
[pools.demo]
exec = ["/bin/true"]
min_workers = 1
max_workers = 8
threads_per_worker = 2
target_queue_depth_per_worker = 10
scale_down_window_sec = 12
[pools.demo.source]
path = "/var/lib/flexiq/demo.db"
TOML
model=$("$out/flexiq-scaled" simulate --config "$out/demo.toml" --workload "$out/window.csv" \
	--startup "$STARTUP" --wake 0.25 --until-min --format jsonl | tail -n 1)
# The demo counts its 3 s lead-in at min_workers too.
read -r mws mp95 <<<"$(python3 -c 'import json,sys; s=json.loads(sys.argv[1]); print("%.1f %.3f" % (s["worker_seconds"] + 3 * 1, s["wait_p95"]))' "$model")"

real=()
for i in $(seq "$RUNS"); do
	if [[ ${REUSE:-} == 1 ]]; then
		[[ -f $out/demo-$i.log ]] || break
		line=$(grep '^summary:' "$out/demo-$i.log")
		echo "sandbox run $i (from $out/demo-$i.log): $line"
		real+=("$(python3 -c 'import re,sys; m=re.search(r"p95 wait ([0-9.]+)s, ([0-9]+) worker-seconds", sys.argv[1]); print(m.group(2), m.group(1))' "$line")")
		continue
	fi
	bin/flexiq-demo --deb "$deb" >"$out/demo-$i.log" 2>&1 || { tail -n 20 "$out/demo-$i.log"; exit 1; }
	line=$(grep '^summary:' "$out/demo-$i.log")
	echo "sandbox run $i: $line"
	real+=("$(python3 -c 'import re,sys; m=re.search(r"p95 wait ([0-9.]+)s, ([0-9]+) worker-seconds", sys.argv[1]); print(m.group(2), m.group(1))' "$line")")
done
printf '%s\n' "${real[@]}" | python3 -c '
import statistics, sys
mws, mp95 = float(sys.argv[1]), float(sys.argv[2])
runs = [tuple(map(float, l.split())) for l in sys.stdin if l.strip()]
rws = statistics.median(r[0] for r in runs)
rp95 = statistics.median(r[1] for r in runs)
print()
print("| | sandbox (median of %d) | model | model / sandbox | target |" % len(runs))
print("|---|---|---|---|---|")
print("| worker-seconds | %.0f | %.0f | %.3f | within 10%% |" % (rws, mws, mws / rws))
print("| p95 wait (s) | %.2f | %.2f | %.3f | within 20%% |" % (rp95, mp95, mp95 / rp95))
print()
print("sandbox runs (worker-seconds, p95 s):", runs)
' "$mws" "$mp95"
