#!/usr/bin/env bash
# P4 and the cross-check of issue 11, in the workload model (no sandbox, no
# root): each trace against flexiq's defaults, a fixed pool, a 30 s down
# window, today's policy with its best setting for the code trace, and the
# opt-in Little's law signal. Prints one markdown table per trace.
#
#   bench/simulate-p4.sh            the tables of docs/simulate.md
#   SWEEP=1 bench/simulate-p4.sh    also every setting of a small grid, as TSV
#
# Settings common to every run: 1-thread workers, max_workers 20, poll 5 s,
# startup 2 s. Service times: code trace 1 s + 0.05 s x GeneratedTokens (the
# issue's); conversation trace 0.2 s + 0.01 s x GeneratedTokens (mean 2.3 s,
# 12.7 busy threads on average, so 20 workers can carry it); generated
# traces 0.5 s + an exponential of mean 2 s.
#
# The Azure traces are CC-BY 4.0, see bench/traces/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
out=bin/simulate-p4
mkdir -p "$out"
$GO build -o "$out/flexiq-scaled" ./cmd/flexiq-scaled
bin="$out/flexiq-scaled"

"$bin" simulate --generate poisson --rate 2.5 --duration 3600 --seed 1 >"$out/poisson.csv"
"$bin" simulate --generate diurnal --rate 2.5 --duration 3600 --seed 1 >"$out/diurnal.csv"
"$bin" simulate --generate onoff --rate 2.5 --duration 3600 --period 300 --on 60 --seed 1 >"$out/onoff.csv"

# config NAME EXTRA-KEYS: a one-pool config with the common settings.
config() {
	cat >"$out/$1.toml" <<TOML
[pools.p]
exec = ["/bin/true"]
max_workers = 20
threads_per_worker = 1
poll_interval_sec = 5
$2
[pools.p.source]
path = "/var/lib/flexiq/p.db"
TOML
	echo "$out/$1.toml"
}

# run CONFIG TRACE SERVICE: "worker-seconds|p95|actions" of one run.
run() {
	"$bin" simulate --config "$1" --workload "$2" --service "$3" --format jsonl | tail -n 1 |
		python3 -c 'import json,sys; s=json.load(sys.stdin); print("%s|%.2f|%d|%s" % (format(round(s["worker_seconds"]), ","), s["wait_p95"], s["actions"], format(round(s["floor"]), ",")))'
}

policies=(
	"fixed 20|min_workers = 20"
	"flexiq defaults (scale_down_window_sec 300)|"
	"defaults with a 30 s down window|scale_down_window_sec = 30"
	"today's policy, best setting for the code trace: depth 1, tolerance 0.5, no down window|target_queue_depth_per_worker = 1
tolerance = 0.5
scale_down_window_sec = 0"
	"littles-law (window 15 s), same depth, tolerance and window|target_queue_depth_per_worker = 1
tolerance = 0.5
scale_down_window_sec = 0
demand = \"littles-law\"
demand_window_sec = 15"
)
traces=(
	"azure-llm-code-2023.csv|bench/traces/azure-llm-code-2023.csv|1 + 0.05*GeneratedTokens"
	"azure-llm-conv-2023.csv|bench/traces/azure-llm-conv-2023.csv|0.2 + 0.01*GeneratedTokens"
	"Poisson, 2.5/s, 1 h|$out/poisson.csv|1"
	"diurnal, 0.5 to 4.5/s, 1 h|$out/diurnal.csv|1"
	"on/off, 12.5/s for 60 s of every 300 s, 1 h|$out/onoff.csv|1"
)
for t in "${traces[@]}"; do
	IFS='|' read -r tname tpath tsvc <<<"$t"
	echo
	echo "### $tname"
	echo
	echo "| policy | worker-seconds | p95 wait (s) | actions |"
	echo "|---|---|---|---|"
	i=0
	for p in "${policies[@]}"; do
		pname=${p%%|*}
		cfg=$(config "policy$i" "${p#*|}")
		IFS='|' read -r ws p95 act floor <<<"$(run "$cfg" "$tpath" "$tsvc")"
		echo "| $pname | $ws | $p95 | $act |"
		i=$((i + 1))
	done
	echo
	echo "floor (total service time): $floor worker-seconds"
done

if [[ ${SWEEP:-} == 1 ]]; then
	echo
	printf 'trace\tdemand\tdepth\ttolerance\tdown\twindow\tworker_seconds\tp95\tactions\n'
	for t in "${traces[@]}"; do
		IFS='|' read -r tname tpath tsvc <<<"$t"
		for depth in 1 2 5 15; do for tol in 0.1 0.3 0.5; do for down in 0 10 15 30 60 300; do
			for win in none 15 30 60 120; do
				extra="target_queue_depth_per_worker = $depth
tolerance = $tol
scale_down_window_sec = $down"
				if [[ $win != none ]]; then
					extra+=$'\ndemand = "littles-law"\ndemand_window_sec = '"$win"
				fi
				cfg=$(config sweep "$extra")
				IFS='|' read -r ws p95 act floor <<<"$(run "$cfg" "$tpath" "$tsvc")"
				printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tname" "$([[ $win == none ]] && echo - || echo littles-law)" "$depth" "$tol" "$down" "$win" "$ws" "$p95" "$act"
			done
		done; done; done
	done
fi
