#!/usr/bin/env bash
# The sidecar's overhead (issue 5's budgets), each figure beside a reference from the same run:
#   1. idle: the sidecar's CPU while it watches an idle JVM at the default 5 ms threshold, beside
#      the same JVM's own CPU without stallscope (goal: sidecar <= 0.5% of a core);
#   2. sampling: a JVM with 200 threads frozen for 5 s; the sample rate the sidecar reached and the
#      CPU it spent doing it (goal: >= 500 Hz using <= 1 core);
#   3. throughput: a CPU-bound JVM (one busy thread per core) under `stallscope run` against the
#      same JVM alone, runs interleaved (goal: change <= 1%).
# Medians over RUNS runs, with min and max. CPU is read from /proc/<pid>/task/*/schedstat (ns).
#
#   bench/doctor_overhead.sh             # 30 s windows, 3 runs (about 8 minutes)
#   bench/doctor_overhead.sh --quick     # 8 s windows, 3 runs (about 3 minutes)
#   WINDOW=60 RUNS=5 JAVA=/usr/lib/jvm/temurin-25-jdk-amd64/bin/java bench/doctor_overhead.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"

window=${WINDOW:-30}
runs=${RUNS:-3}
warmup=${WARMUP:-3}
if [[ "${1:-}" == "--quick" ]]; then window=${WINDOW:-8}; fi
java=${JAVA:-java}
javac=${JAVAC:-javac}
workloads="$root/java/workloads/target/stallscope-workloads.jar"
for need in "$bin" "$workloads"; do
  [[ -f "$need" ]] || { echo "doctor_overhead.sh: $need is missing; run make build first" >&2; exit 1; }
done
command -v jq > /dev/null || { echo "doctor_overhead.sh: jq not found; apt-get install jq" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/stallscope-doctor-bench.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$javac" -nowarn --release 11 -d "$work/classes" "$root/java/agent/bench/Workload.java"

cpu_ns() { threads_cpu_ns "$1"; }
# wakeups PID: times any thread of PID was switched in (schedstat's third field).
wakeups() {
  cat /proc/"$1"/task/*/schedstat 2> /dev/null | awk '{ s += $3 } END { printf "%.0f\n", s }'
}
# wait_for FILE PATTERN: until a line of FILE matches.
wait_for() {
  until grep -q "$2" "$1" 2> /dev/null; do sleep 0.05; done
}
# child_of PID: the java process under the sidecar.
child_of() {
  local c=""
  until [[ -n "$c" ]]; do
    kill -0 "$1" 2> /dev/null || { echo "doctor_overhead.sh: stallscope (pid $1) exited before starting its JVM; see $work" >&2; return 1; }
    c=$(pgrep -P "$1" | head -n 1 || true); sleep 0.05
  done
  echo "$c"
}

# One idle window: the Workload prints "start"/"end" around it, then waits for its stdin to close.
# $1 = "with" (under stallscope run) or "without".
idle_run() {
  local mode=$1 log="$work/idle-$1.out" fifo="$work/idle-$1.in" ss="" jvm
  rm -f "$fifo" "$log"; mkfifo "$fifo"
  exec 7<> "$fifo" # held open here (not in the child) until the window is over
  local cmd=("$java" -cp "$work/classes" Workload idle "$warmup" "$window")
  if [[ $mode == with ]]; then
    rm -rf "$work/rec-idle"
    "$bin" run --out "$work/rec-idle" -- "${cmd[@]}" < "$fifo" > "$log" 2>&1 7>&- &
    ss=$!; jvm=$(child_of "$ss")
  else
    "${cmd[@]}" < "$fifo" > "$log" 2>&1 7>&- &
    jvm=$!
  fi
  pids+=("$!")
  wait_for "$log" '^start'
  local s0=0 j0 w0=0; j0=$(cpu_ns "$jvm"); [[ -n $ss ]] && s0=$(cpu_ns "$ss") && w0=$(wakeups "$ss")
  local t0; t0=$(date +%s%N)
  wait_for "$log" '^end'
  local s1=0 j1 w1=0; j1=$(cpu_ns "$jvm"); [[ -n $ss ]] && s1=$(cpu_ns "$ss") && w1=$(wakeups "$ss")
  local t1; t1=$(date +%s%N)
  exec 7>&-
  wait "$!" || true
  echo "$(pct $((s1 - s0)) $((t1 - t0))) $(pct $((j1 - j0)) $((t1 - t0))) $(( (w1 - w0) * 1000000000 / (t1 - t0) ))"
}

echo "window ${window}s, ${runs} runs, $("$java" -version 2>&1 | head -n 1)"
echo
echo "-- 1. idle JVM: CPU as % of one core"
: > "$work/idle-with"; : > "$work/idle-without"
for _ in $(seq "$runs"); do
  idle_run with >> "$work/idle-with"
  idle_run without >> "$work/idle-without"
done
read -r sc_med sc_min sc_max < <(awk '{ print $1 }' "$work/idle-with" | median_spread)
read -r jw_med jw_min jw_max < <(awk '{ print $2 }' "$work/idle-with" | median_spread)
read -r jo_med jo_min jo_max < <(awk '{ print $2 }' "$work/idle-without" | median_spread)
printf '  %-44s %7s%%  (%s-%s)\n' "stallscope sidecar (threshold 5ms)" "$sc_med" "$sc_min" "$sc_max"
printf '  %-44s %7s%%  (%s-%s)\n' "the JVM under stallscope (with the agent)" "$jw_med" "$jw_min" "$jw_max"
printf '  %-44s %7s%%  (%s-%s)\n' "reference: the same JVM alone" "$jo_med" "$jo_min" "$jo_max"
echo "  sidecar / JVM alone: $(ratio "$sc_med" "$jo_med")x   goal: sidecar <= 0.5%"
# The floor for any watcher that wakes this often: cyclictest (SCHED_OTHER, one thread) at the
# sidecar's own wake-up rate, on this machine, now. On a VM each timer wake-up is costly.
read -r hz_idle _ _ < <(awk '{ print $3 }' "$work/idle-with" | median_spread)
read -r cy_med cy_min cy_max < <(cyclictest_cpu "$hz_idle" "$window" "$runs") || true
if [[ -n "$cy_med" ]]; then
  printf '  %-44s %7s%%  (%s-%s)\n' "reference: cyclictest at the same ${hz_idle} Hz" "$cy_med" "$cy_min" "$cy_max"
  echo "  sidecar / cyclictest at its wake-up rate: $(ratio "$sc_med" "$cy_med")x"
else
  echo "  (cyclictest not found: apt-get install rt-tests for the wake-up floor reference)"
fi
echo

echo "-- 2. a JVM with 200 threads frozen for 5 s"
: > "$work/freeze"
for r in $(seq "$runs"); do
  log="$work/freeze-$r.out"
  "$bin" run --out "$work/rec-freeze-$r" -- "$java" -jar "$workloads" idle --threads 200 --duration 14s > "$log" 2>&1 &
  ss=$!; pids+=("$ss")
  jvm=$(child_of "$ss")
  sleep 4
  threads=$(ls /proc/"$jvm"/task | wc -l)
  s0=$(cpu_ns "$ss"); t0=$(date +%s%N)
  "$bin" inject freeze "$jvm" --for 5s > /dev/null
  sleep 0.2
  s1=$(cpu_ns "$ss"); t1=$(date +%s%N)
  wait "$ss" || true
  stall=$("$bin" report "$work/rec-freeze-$r" --json | jq -c '[.stalls[] | select(.duration_ns > 1000000000)] | max_by(.duration_ns) // empty | .stall')
  if [[ -z "$stall" ]]; then echo "  run $r: no stall recorded (see $log)" >&2; continue; fi
  # The rate while sampling: intervals between the stall's samples over their span (the stall
  # itself began a threshold before the first look).
  hz=$(jq -c --argjson s "$stall" 'select(.stall == $s and .baseline != true) | .t' "$work/rec-freeze-$r/samples.jsonl" |
    awk 'NR == 1 { a = $1 } { b = $1; n++ } END { if (n > 1) printf "%.0f", (n - 1) / ((b - a) / 1e9) }')
  echo "$hz $(pct $((s1 - s0)) $((t1 - t0))) $threads" >> "$work/freeze"
done
read -r hz_med hz_min hz_max < <(awk '{ print $1 }' "$work/freeze" | median_spread)
read -r fc_med fc_min fc_max < <(awk '{ print $2 }' "$work/freeze" | median_spread)
read -r th_med _ _ < <(awk '{ print $3 }' "$work/freeze" | median_spread)
printf '  %-44s %7s Hz (%s-%s)   goal >= 500 Hz\n' "sample rate over ${th_med} threads" "$hz_med" "$hz_min" "$hz_max"
printf '  %-44s %7s%%  (%s-%s)   goal <= 100%% (one core)\n' "sidecar CPU during the freeze" "$fc_med" "$fc_min" "$fc_max"
echo "  reference: the idle sidecar above, ${sc_med}%: the freeze costs $(ratio "$fc_med" "$sc_med")x idle"
echo

echo "-- 3. CPU-bound JVM ($(nproc) busy threads): work items in ${window}s"
: > "$work/busy-with"; : > "$work/busy-without"
for _ in $(seq "$runs"); do
  cmd=("$java" -cp "$work/classes" Workload busy "$warmup" "$window")
  "$bin" run --out "$work/rec-busy" -- "${cmd[@]}" < /dev/null 2>&1 | awk '/^end / { print $2 }' >> "$work/busy-with"
  rm -rf "$work/rec-busy"
  "${cmd[@]}" < /dev/null 2>&1 | awk '/^end / { print $2 }' >> "$work/busy-without"
done
read -r bw_med bw_min bw_max < <(median_spread < "$work/busy-with")
read -r bo_med bo_min bo_max < <(median_spread < "$work/busy-without")
printf '  %-44s %12s (%s-%s)\n' "under stallscope run" "$bw_med" "$bw_min" "$bw_max"
printf '  %-44s %12s (%s-%s)\n' "reference: the same JVM alone" "$bo_med" "$bo_min" "$bo_max"
echo "  throughput ratio (with / without): $(awk -v a="$bw_med" -v b="$bo_med" 'BEGIN { printf "%.4f", a / b }')   goal >= 0.99"
