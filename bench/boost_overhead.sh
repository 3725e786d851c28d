#!/usr/bin/env bash
# What `run --boost-on safepoint` costs: the booster's own CPU (a real-time thread looking at
# the JVM's perf counters every --boost-poll) beside an idle JVM, for three poll intervals,
# against cyclictest waking at the same rate in the same run (the price of a timer wake-up on
# this machine, now). Needs root (SCHED_FIFO and the boost itself).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
runs=${RUNS:-3}
secs=${SECS:-12}
jar="$root/java/workloads/target/stallscope-workloads.jar"
[ "$(id -u)" = 0 ] || { echo "boost_overhead.sh needs root (SCHED_FIFO, CAP_SYS_NICE)"; exit 1; }
echo "the safepoint booster beside an idle JVM, ${secs} s × ${runs} per interval (% of one core)"
for poll in 200us 500us 1ms; do
  case $poll in 200us) hz=5000 ;; 500us) hz=2000 ;; 1ms) hz=1000 ;; esac
  got=()
  for _ in $(seq "$runs"); do
    d=$(mktemp -d)
    "$bin" run --boost fifo:1 --boost-poll "$poll" --out "$d/rec" -- \
      java -jar "$jar" idle --duration "${secs}s" > /dev/null 2>&1
    got+=("$("$bin" report "$d/rec" --json 2> /dev/null \
      | python3 -c 'import json,sys; b=json.load(sys.stdin)["summary"]["boost"]; print("%.3f" % (100 * b["cpu_share"]))')")
    rm -rf "$d"
  done
  read -r b_med b_min b_max < <(printf '%s\n' "${got[@]}" | median_spread)
  read -r c_med c_min c_max < <(cyclictest_cpu "$hz" "$secs" "$runs") || true
  printf '  --boost-poll %-6s booster %6s%% (%s-%s)' "$poll" "$b_med" "$b_min" "$b_max"
  if [ -n "${c_med:-}" ]; then
    printf '   cyclictest at %s Hz %6s%% (%s-%s)   ratio %sx\n' "$hz" "$c_med" "$c_min" "$c_max" "$(ratio "$b_med" "$c_med")"
  else
    echo "   (cyclictest not found: apt-get install rt-tests for the reference)"
  fi
done
