#!/usr/bin/env bash
# P4 and the cross-check of issues 11 and 17, in the workload model (no
# sandbox, no root). Prints, as markdown:
#
#   1. P4 at ten phases: the recommended P4 setting on the code trace with
#      its arrivals shifted by 0, 0.5, ..., 4.5 s against the controller's
#      ticks (simulate --shift), each row against the target, then the worst
#      of the ten, which is the figure that counts (issue 17), with its
#      verdict; then the same ten phases for the P4 setting published before
#      issue 17 and for the most eager setting;
#   2. generated traces (Poisson, diurnal, on/off): the new code against
#      today's (commit 138d0d2, before issue 17) with the same setting (less
#      the onset rules' keys, which today's code does not know) and a
#      30 s down window, for flexiq's defaults, the P4 setting before issue
#      17 and the recommended one; then the recommended setting against
#      today's defaults with a 30 s down window;
#   3. one table per trace: flexiq's defaults, a fixed pool, a 30 s down
#      window, today's policy with its best setting for the code trace, the
#      Little's law setting of P4 and the recommended P4 setting.
#
#   bench/simulate-p4.sh            the tables of docs/simulate.md (two minutes)
#   SWEEP=1 bench/simulate-p4.sh    also every setting of a small grid, as TSV
#   BIN=path bench/simulate-p4.sh   another build as the new code; section 1
#                                   needs --shift (issue 17 on)
#   BIN_OLD=path                    today's code for section 2; by default the
#                                   script builds commit 138d0d2 from a
#                                   temporary git worktree (removed after)
#
# Settings common to every run: 1-thread workers, min_workers 1,
# max_workers 20, poll 5 s, startup 2 s. Service times: code trace 1 s +
# 0.05 s x GeneratedTokens (the issue's); conversation trace 0.2 s + 0.01 s
# x GeneratedTokens (mean 2.3 s, 12.7 busy threads on average, so 20
# workers can carry it); generated traces 0.5 s + an exponential of mean 2 s.
#
# The Azure traces are CC-BY 4.0: Patel et al., "Splitwise: Efficient
# generative LLM inference using phase splitting", ISCA 2024; Azure Public
# Dataset (AzureLLMInferenceDataset2023). See bench/traces/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
out=bin/simulate-p4
mkdir -p "$out"
if [[ -n ${BIN:-} ]]; then
	bin=$BIN
else
	$GO build -o "$out/flexiq-scaled" ./cmd/flexiq-scaled
	bin="$out/flexiq-scaled"
fi

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

# runb BINARY CONFIG TRACE SERVICE [FLAGS...]: "worker-seconds|p95|actions|
# floor|raw worker-seconds" of one run; run is runb with this tree's build.
runb() {
	local b=$1 cfg=$2 trace=$3 svc=$4
	shift 4
	"$b" simulate --config "$cfg" --workload "$trace" --service "$svc" --format jsonl "$@" | tail -n 1 |
		python3 -c 'import json,sys; s=json.load(sys.stdin); print("%s|%.2f|%d|%s|%d" % (format(round(s["worker_seconds"]), ","), s["wait_p95"], s["actions"], format(round(s["floor"]), ","), round(s["worker_seconds"])))'
}
run() { runb "$bin" "$@"; }

# The recommended P4 setting (issue 17): Little's law over 7 s, tolerance
# 0.5, no down window, with the two rules for a burst's onset
# (internal/policy/warm.go): the onset signal (from 3 jobs, the rate they
# arrived at times the last service time observed) and a keep-warm floor
# of 3 workers for 35 s after the last work. The backlog rule
# (internal/policy/clear.go) lets every scale-up through that the band
# would otherwise hold.
p4_keys='target_queue_depth_per_worker = 1
target_utilisation = 1
tolerance = 0.5
scale_down_window_sec = 0
demand = "littles-law"
demand_window_sec = 7
onset_min_jobs = 3
keep_warm_workers = 3
keep_warm_sec = 35'
# The recommended P4 setting before the onset rules, for comparison.
p4noonset_keys='target_queue_depth_per_worker = 1
target_utilisation = 0.95
tolerance = 0.6
scale_down_window_sec = 0
demand = "littles-law"
demand_window_sec = 7'
# The P4 setting published before issue 17 (docs/simulate.md, "P4").
p4prev_keys='target_queue_depth_per_worker = 1
tolerance = 0.5
scale_down_window_sec = 0
demand = "littles-law"
demand_window_sec = 15'
# The most eager setting: one running job asks for all 20 workers, no band,
# no window.
eager_keys='target_queue_depth_per_worker = 1
target_utilisation = 0.05
tolerance = 0
scale_down_window_sec = 0'
down30_keys='scale_down_window_sec = 30'
code=bench/traces/azure-llm-code-2023.csv
codesvc='1 + 0.05*GeneratedTokens'
shifts=(0 0.5 1 1.5 2 2.5 3 3.5 4 4.5)

# verdict RAW-WS P95 ACTIONS: the P4 target, met or what is missed.
verdict() {
	python3 -c "ws,p,a=$1,$2,$3; f=[n for n,ok in (('worker-seconds',ws<=31000),('p95',p<=25),('actions',a<=150)) if not ok]; print('met' if not f else 'missed: '+', '.join(f))"
}

# 1. P4 at ten phases. The target (issue 17) must hold at every phase.
p4cfg=$(config p4 "$p4_keys")
echo "### P4 at ten phases: azure-llm-code-2023.csv, the recommended setting"
echo
echo "| shift (s) | worker-seconds | p95 wait (s) | actions | target (<= 31,000, <= 25 s, <= 150) |"
echo "|---|---|---|---|---|"
worst_ws=0 worst_p95=0 worst_act=0
for shift in "${shifts[@]}"; do
	IFS='|' read -r ws p95 act floor raw <<<"$(run "$p4cfg" "$code" "$codesvc" --shift "$shift")"
	echo "| $shift | $ws | $p95 | $act | $(verdict "$raw" "$p95" "$act") |"
	worst_ws=$(python3 -c "print(max($worst_ws, $raw))")
	worst_p95=$(python3 -c "print(max($worst_p95, $p95))")
	worst_act=$((act > worst_act ? act : worst_act))
done
echo "| **worst of ten** | **$(python3 -c "print(format($worst_ws, ','))")** | **$(printf '%.2f' "$worst_p95")** | **$worst_act** | **$(verdict "$worst_ws" "$worst_p95" "$worst_act")** |"
echo
echo "floor (total service time): $floor worker-seconds"

# 1b. Other settings at the ten phases, each phase's row and the worst. The
# most eager setting is not a bound on the p95: a pool that keeps workers
# through a quiet spell (here the band holding 2, the signal holding λW)
# can do better than one that drops to min_workers whenever a tick finds
# nothing to do.
echo
echo "Other settings at the ten phases (worker-seconds / p95 wait / actions):"
echo
echo "| setting | $(printf '%s | ' "${shifts[@]}")worst |"
echo "|---|$(printf -- '---|%.0s' "${shifts[@]}")---|"
for s in "recommended|$p4_keys" "recommended before the onset rules (window 7 s, utilisation 0.95, tolerance 0.6)|$p4noonset_keys" "P4 setting before issue 17 (window 15 s, tolerance 0.5), with the backlog rule|$p4prev_keys" "most eager (one running job asks for 20; no band, no window)|$eager_keys"; do
	cfg=$(config other "${s#*|}")
	row="| ${s%%|*} |" w_ws=0 w_p=0 w_a=0
	for shift in "${shifts[@]}"; do
		IFS='|' read -r ws p95 act _ raw <<<"$(run "$cfg" "$code" "$codesvc" --shift "$shift")"
		row+=" $ws / $p95 / $act |"
		w_ws=$(python3 -c "print(max($w_ws, $raw))") w_p=$(python3 -c "print(max($w_p, $p95))") w_a=$((act > w_a ? act : w_a))
	done
	echo "$row **$(python3 -c "print(format($w_ws, ','))") / $(printf '%.2f' "$w_p") / $w_a** |"
done

# 2. Generated traces: the new code against today's (commit 138d0d2, before
# issue 17's rule) with the same setting and a 30 s down window, for
# flexiq's defaults, the P4 setting before issue 17 and the recommended
# one; then the recommended setting (new code, no down window) against
# today's defaults with a 30 s down window.
if [[ -n ${BIN_OLD:-} ]]; then
	old=$BIN_OLD
else
	old="$out/flexiq-scaled-138d0d2"
	if [[ ! -x $old ]]; then
		src=$(mktemp -d)
		git worktree add --detach -q "$src/tree" 138d0d2
		(cd "$src/tree" && $GO build -o "$OLDPWD/$old" ./cmd/flexiq-scaled) || {
			git worktree remove --force "$src/tree"
			exit 1
		}
		git worktree remove --force "$src/tree"
		rmdir "$src"
	fi
fi
gen() { # NAME GENERATE-FLAGS...
	local name=$1
	shift
	"$bin" simulate --generate "$@" --duration 3600 >"$out/gen-$name.csv"
	echo "$out/gen-$name.csv"
}
generated=(
	"Poisson 2.5/s, seed 1|poisson --rate 2.5 --seed 1"
	"Poisson 2.5/s, seed 2|poisson --rate 2.5 --seed 2"
	"Poisson 2.5/s, seed 3|poisson --rate 2.5 --seed 3"
	"Poisson 6/s, seed 1 (near capacity)|poisson --rate 6 --seed 1"
	"diurnal 0.5-4.5/s, seed 1|diurnal --rate 2.5 --seed 1"
	"diurnal 0.5-4.5/s, seed 2|diurnal --rate 2.5 --seed 2"
	"diurnal 0.5-4.5/s, seed 3|diurnal --rate 2.5 --seed 3"
	"diurnal 0.8-7.2/s, seed 1 (peak above capacity)|diurnal --rate 4 --seed 1"
	"diurnal 1-9/s, seed 1 (peak above capacity)|diurnal --rate 5 --seed 1"
	"on/off 12.5/s 60 s in 300 s, seed 1|onoff --rate 2.5 --period 300 --on 60 --seed 1"
	"on/off 12.5/s 60 s in 300 s, seed 2|onoff --rate 2.5 --period 300 --on 60 --seed 2"
	"on/off 12.5/s 60 s in 300 s, seed 3|onoff --rate 2.5 --period 300 --on 60 --seed 3"
	"on/off 7.5/s 120 s in 300 s, seed 1|onoff --rate 3 --period 300 --on 120 --seed 1"
)
traces_gen=()
i=0
for g in "${generated[@]}"; do
	# shellcheck disable=SC2086 # the generator's flags, split on purpose
	traces_gen+=("${g%%|*}|$(gen "g$i" ${g#*|})")
	i=$((i + 1))
done
# judge A-RESULT B-RESULT: "yes" when B costs no more worker-seconds than A
# and waits no longer at p95, else what is worse.
judge() {
	local aws ap95 bws bp95
	IFS='|' read -r _ ap95 _ _ aws <<<"$1"
	IFS='|' read -r _ bp95 _ _ bws <<<"$2"
	python3 -c "
w=[]
if $bws > $aws: w.append('worker-seconds +%.1f%%' % (100.0*($bws-$aws)/$aws))
if $bp95 > $ap95: w.append('p95 +%.2f s' % ($bp95-$ap95))
print('yes' if not w else 'no: ' + ', '.join(w))"
}
cell() { # RESULT: "worker-seconds / p95 / actions"
	local ws p95 act
	IFS='|' read -r ws p95 act _ _ <<<"$1"
	echo "$ws / $p95 / $act"
}
down30cfg=$(config down30 "$down30_keys")
for s in "flexiq's defaults|" "the P4 setting before issue 17|$p4prev_keys" "the recommended P4 setting|$p4_keys"; do
	cfg=$(config same30 "$(printf '%s\n' "${s#*|}" | grep -v '^scale_down_window_sec')
$down30_keys")
	echo
	echo "### Generated traces: ${s%%|*} with a 30 s down window, today's code (138d0d2) and this one"
	echo
	echo "| trace | today: worker-seconds / p95 (s) / actions | new | new not worse |"
	echo "|---|---|---|---|"
	# Today's code does not know the onset rules' keys (issue 17): it
	# runs the setting without them.
	oldcfg=$(config same30old "$(printf '%s\n' "${s#*|}" | grep -v -e '^scale_down_window_sec' -e '^onset_min_jobs' -e '^keep_warm_')
$down30_keys")
	for t in "${traces_gen[@]}"; do
		a=$(runb "$old" "$oldcfg" "${t#*|}" 1)
		b=$(runb "$bin" "$cfg" "${t#*|}" 1)
		echo "| ${t%%|*} | $(cell "$a") | $(cell "$b") | $(judge "$a" "$b") |"
	done
done
echo
echo "### Generated traces: the recommended P4 setting (new code) against today's defaults with a 30 s down window"
echo
echo "| trace | today, defaults, 30 s window: worker-seconds / p95 (s) / actions | recommended P4 setting | worker-seconds not more, p95 not worse |"
echo "|---|---|---|---|"
for t in "${traces_gen[@]}"; do
	a=$(runb "$old" "$down30cfg" "${t#*|}" 1)
	b=$(run "$p4cfg" "${t#*|}" 1)
	echo "| ${t%%|*} | $(cell "$a") | $(cell "$b") | $(judge "$a" "$b") |"
done

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
	"recommended P4 setting: littles-law (window 7 s), target utilisation 1, tolerance 0.5, no down window, onset from 3 jobs, keep 3 warm for 35 s|$p4_keys"
	"recommended before the onset rules: littles-law (window 7 s), target utilisation 0.95, tolerance 0.6, no down window|$p4noonset_keys"
)
traces=(
	"azure-llm-code-2023.csv|bench/traces/azure-llm-code-2023.csv|1 + 0.05*GeneratedTokens"
	"azure-llm-conv-2023.csv|bench/traces/azure-llm-conv-2023.csv|0.2 + 0.01*GeneratedTokens"
	"Poisson, 2.5/s, 1 h|$out/poisson.csv|1"
	"diurnal, 0.5 to 4.5/s, 1 h|$out/diurnal.csv|1"
	"on/off, 12.5/s for 60 s of every 300 s, 1 h|$out/onoff.csv|1"
)
echo
echo "### Every policy, trace by trace"
for t in "${traces[@]}"; do
	IFS='|' read -r tname tpath tsvc <<<"$t"
	echo
	echo "#### $tname"
	echo
	echo "| policy | worker-seconds | p95 wait (s) | actions |"
	echo "|---|---|---|---|"
	i=0
	for p in "${policies[@]}"; do
		pname=${p%%|*}
		cfg=$(config "policy$i" "${p#*|}")
		IFS='|' read -r ws p95 act floor _ <<<"$(run "$cfg" "$tpath" "$tsvc")"
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
				IFS='|' read -r ws p95 act floor _ <<<"$(run "$cfg" "$tpath" "$tsvc")"
				printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tname" "$([[ $win == none ]] && echo - || echo littles-law)" "$depth" "$tol" "$down" "$win" "$ws" "$p95" "$act"
			done
		done; done; done
	done
fi
