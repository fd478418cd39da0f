#!/usr/bin/env bash
# `make stress`: the whole test suite (`make test`) STRESS_RUNS times in a row (default 3)
# while STRESS_LOAD busy loops (default: two per core) keep every core busy, so that a test
# that leans on timing it does not control fails here rather than at random in CI.
#
# Prints PASS/FAIL, the time and pytest's summary line of every run, the failed tests, and
# where each run's full log is (var/stress/<time>/run-N.log). The busy loops are started here
# and killed by their PIDs at the end, on error and on Ctrl-C. Exit status 1 if any run failed.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
runs=${STRESS_RUNS:-3}
load=${STRESS_LOAD:-$((2 * $(nproc)))}
make_cmd=${MAKE:-make}
logdir=$root/var/stress/$(date +%Y%m%d-%H%M%S)
mkdir -p "$logdir"

loops=()
stop_loops() {
  for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${loops[@]}"; do wait "$pid" 2>/dev/null; done
  loops=()
}
trap stop_loops EXIT
trap 'stop_loops; exit 130' INT TERM

for _ in $(seq "$load"); do
  ( while :; do :; done ) &
  loops+=("$!")
done
echo "stress: $runs runs of \`make test\`, $load busy loops in the background (PIDs ${loops[*]}), logs in $logdir"

failed=0
summary=()
for run in $(seq "$runs"); do
  log=$logdir/run-$run.log
  start=$(date +%s)
  "$make_cmd" -C "$root" --no-print-directory test >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  # pytest's last line ("1 failed, 277 passed in 1160.07s (0:19:20)") or the failing step's
  result=$(grep -E '^[= ]*[0-9]+ (passed|failed|errors?)[^;]* in [0-9.]+s' "$log" | tail -n 1 | tr -d '=' | xargs)
  [ -n "$result" ] || result=$(grep -E 'make(\[[0-9]+\])?: \*\*\*' "$log" | tail -n 1)
  if [ "$rc" = 0 ]; then verdict=PASS; else verdict=FAIL; failed=$((failed + 1)); fi
  line=$(printf 'run %d: %s in %dm%02ds  %s' "$run" "$verdict" $((secs / 60)) $((secs % 60)) "$result")
  summary+=("$line")
  echo "$line"
  if [ "$rc" != 0 ]; then
    grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/    /'
    echo "    log: $log"
  fi
done

stop_loops
echo "stress: $((runs - failed)) of $runs runs passed under $load busy loops"
printf '%s\n' "${summary[@]}" >"$logdir/summary.txt"
[ "$failed" = 0 ]
