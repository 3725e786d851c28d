#!/usr/bin/env bash
# `stallscope watch`'s own cost (issue 13's budgets), beside a timer loop at the same wake-up rate
# measured in the same run:
#   N idle JVMs (1, then 50) watched at the default 5 ms threshold; watch's CPU (every thread of
#   it and of its guardians, from schedstat) and wake-ups over WINDOW seconds, after every JVM is
#   attached. Goals: one idle JVM <= 0.5% of a core, 50 idle JVMs <= 1%.
#   Reference: cyclictest (SCHED_OTHER, one thread) waking at watch's own measured rate.
# Medians over RUNS windows, with min and max.
#
#   bench/watch_overhead.sh              # 30 s windows, 3 runs, 1 and 50 JVMs (about 8 minutes)
#   bench/watch_overhead.sh --quick      # 10 s windows, 1 run, 1 and 10 JVMs
#   COUNTS="1 20" WINDOW=20 bench/watch_overhead.sh
#   RESOLUTION=5ms COUNTS=50 bench/watch_overhead.sh   # the agents' meters at 5 ms (watch --resolution)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

window=${WINDOW:-30}
runs=${RUNS:-3}
counts=${COUNTS:-"1 50"}
if [[ "${1:-}" == "--quick" ]]; then window=${WINDOW:-10}; runs=${RUNS:-1}; counts=${COUNTS:-"1 10"}; fi
java=${JAVA:-java}
workloads="$root/java/workloads/target/stallscope-workloads.jar"
for need in "$bin" "$workloads"; do
  [[ -f "$need" ]] || { echo "watch_overhead.sh: $need is missing; run make build first" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/stallscope-watch-bench.XXXXXX")
jvms=()
watch_pid=""
cleanup() {
  [[ -n "$watch_pid" ]] && kill -TERM "$watch_pid" 2> /dev/null && wait "$watch_pid" 2> /dev/null || true
  for p in "${jvms[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The threads of PID and of its children (watch's guardians), one schedstat line each.
schedstats() {
  local p=$1
  cat /proc/"$p"/task/*/schedstat 2> /dev/null || true
  for c in $(pgrep -P "$p" || true); do cat /proc/"$c"/task/*/schedstat 2> /dev/null || true; done
}
# (%.0f: mawk's %d stops at 2^31, 2.1 s of CPU.)
cpu_ns() { schedstats "$1" | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
wakeups() { schedstats "$1" | awk '{ s += $3 } END { printf "%.0f\n", s }'; }
# The CPU of every watched JVM, in ns.
jvms_cpu_ns() { local s=0; for p in "${jvms[@]}"; do s=$((s + $(threads_cpu_ns "$p"))); done; echo "$s"; }
# Stalls watch has begun so far, over every recording.
stalls() { cat "$work"/rec/*/events.jsonl 2> /dev/null | grep -c '"stall-begin"' || true; }

# A marker only this bench's JVMs carry, for --match.
mark="$((RANDOM % 900 + 100))7s"

# start_jvms N: N idle JVMs, small heaps, one compiler thread; waits until each has started.
start_jvms() {
  local n=$1
  for i in $(seq "$n"); do
    "$java" -Xmx16m -Xss256k -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -Xshare:auto \
      -jar "$workloads" idle --duration "$mark" > "$work/jvm-$i.out" 2>&1 &
    jvms+=("$!")
    # Started a few at a time: 50 JVM starts at once would take the machine for a minute.
    (( i % 4 == 0 )) && until grep -q '^idle: pid' "$work/jvm-$i.out" 2> /dev/null; do sleep 0.1; done
  done
  for i in $(seq "$n"); do until grep -q '^idle: pid' "$work/jvm-$i.out" 2> /dev/null; do sleep 0.1; done; done
}

stop_jvms() {
  for p in "${jvms[@]}"; do kill "$p" 2> /dev/null || true; done
  wait "${jvms[@]}" 2> /dev/null || true
  jvms=()
}

echo "window ${window}s, ${runs} runs, agents at ${RESOLUTION:-1ms}, $("$java" -version 2>&1 | head -n 1), $(nproc) CPUs"
for n in $counts; do
  echo
  echo "-- $n idle JVM(s), threshold 5ms: CPU as % of one core"
  start_jvms "$n"
  rm -rf "$work/rec"
  "$bin" watch --match "idle --duration $mark" --out "$work/rec" --resolution "${RESOLUTION:-1ms}" > "$work/watch.out" 2> "$work/watch.err" &
  watch_pid=$!
  # Every JVM attached (a recording each), then a few seconds for the attaches to settle.
  t_wait=$(date +%s)
  until (( $(ls "$work/rec" 2> /dev/null | wc -l) >= n )); do
    sleep 0.5
    if (( $(date +%s) - t_wait > 30 + 3 * n )); then echo "watch_overhead.sh: only $(ls "$work/rec" | wc -l) of $n JVMs attached; see $work/watch.err" >&2; cat "$work/watch.err" >&2; exit 1; fi
  done
  sleep 5
  : > "$work/w"
  for _ in $(seq "$runs"); do
    c0=$(cpu_ns "$watch_pid"); w0=$(wakeups "$watch_pid"); j0=$(jvms_cpu_ns); s0=$(stalls); t0=$(date +%s%N)
    sleep "$window"
    c1=$(cpu_ns "$watch_pid"); w1=$(wakeups "$watch_pid"); j1=$(jvms_cpu_ns); s1=$(stalls); t1=$(date +%s%N)
    echo "$(pct $((c1 - c0)) $((t1 - t0))) $(( (w1 - w0) * 1000000000 / (t1 - t0) )) $(pct $((j1 - j0)) $((t1 - t0))) $((s1 - s0))" >> "$work/w"
  done
  kill -TERM "$watch_pid"; wait "$watch_pid" || true; watch_pid=""
  read -r w_med w_min w_max < <(awk '{ print $1 }' "$work/w" | median_spread)
  read -r hz _ _ < <(awk '{ print $2 }' "$work/w" | median_spread)
  read -r j_med j_min j_max < <(awk '{ print $3 }' "$work/w" | median_spread)
  read -r st_med st_min st_max < <(awk '{ print $4 }' "$work/w" | median_spread)
  printf '  %-46s %7s%%  (%s-%s), %s wake-ups/s\n' "stallscope watch, $n JVM(s)" "$w_med" "$w_min" "$w_max" "$hz"
  printf '  %-46s %7s%%  (%s-%s); stalls >= 5 ms seen per window: %s (%s-%s)\n' "the $n JVMs themselves (their agents' 1 ms meters)" "$j_med" "$j_min" "$j_max" "$st_med" "$st_min" "$st_max"
  read -r c_med c_min c_max < <(cyclictest_cpu "$hz" "$window" "$runs") || true
  if [[ -n "$c_med" ]]; then
    printf '  %-46s %7s%%  (%s-%s)\n' "reference: cyclictest at the same $hz Hz" "$c_med" "$c_min" "$c_max"
    echo "  watch / cyclictest: $(ratio "$w_med" "$c_med")x   goal: watch <= $([[ $n -eq 1 ]] && echo 0.5 || echo 1)% of a core"
  else
    echo "  (cyclictest not found: apt-get install rt-tests for the wake-up reference)"
  fi
  stop_jvms
done
