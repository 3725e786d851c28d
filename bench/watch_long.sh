#!/usr/bin/env bash
# `stallscope watch` over one JVM that stalls all the time, for minutes: does what watch pays per
# stall stay flat as the JVM's recording grows? Each stall's end is diagnosed; until 2026-11-27
# that read the whole live recording again and diagnosed every stall in it, so the cost per stall
# grew with the recording (a quarter of --retain, 256 MB by default, before it is rolled).
# The JVM: safepoints waiting on a loop without a poll (20 rounds every 300 ms, about 3 stalls a
# second), watched from outside at the 5 ms threshold. Printed per window: watch's CPU (every
# thread of it, from schedstat), the stalls diagnosed in it, watch's CPU per stall, and the
# recording's size; the reference is the first window of the same run (last ÷ first).
#
#   bench/watch_long.sh             # 6 windows of 30 s
#   bench/watch_long.sh --quick     # 3 windows of 20 s
#   WINDOWS=10 WINDOW=60 bench/watch_long.sh
#   BIN=/path/to/an/older/stallscope bench/watch_long.sh   # the same, for another build
set -euo pipefail
source "$(dirname "$0")/lib.sh"

window=${WINDOW:-30}
windows=${WINDOWS:-6}
if [[ "${1:-}" == "--quick" ]]; then window=${WINDOW:-20}; windows=${WINDOWS:-3}; fi
bin=${BIN:-$bin}
java=${JAVA:-java}
workloads="$root/java/workloads/target/stallscope-workloads.jar"
for need in "$bin" "$workloads"; do
  [[ -f "$need" ]] || { echo "watch_long.sh: $need is missing; run make build first" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/stallscope-watch-long.XXXXXX")
jvm=""
watch_pid=""
cleanup() {
  [[ -n "$watch_pid" ]] && kill -TERM "$watch_pid" 2> /dev/null && wait "$watch_pid" 2> /dev/null || true
  [[ -n "$jvm" ]] && kill "$jvm" 2> /dev/null && wait "$jvm" 2> /dev/null || true
  [[ -n "${KEEP:-}" ]] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

total=$((window * windows + 60))
"$java" -Xmx64m -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints -jar "$workloads" counted-loop \
  --duration "${total}s" --rounds 20 --every 300ms > "$work/jvm.out" 2>&1 &
jvm=$!
until "$bin" counters "$jvm" sun.rt.safepoints > /dev/null 2>&1; do sleep 0.1; done
"$bin" watch "$jvm" --out "$work/rec" --events "$work/events.jsonl" > /dev/null 2> "$work/watch.err" &
watch_pid=$!
until [[ -s "$work/events.jsonl" ]]; do
  sleep 0.5
  kill -0 "$watch_pid" 2> /dev/null || { echo "watch_long.sh: watch ended; see $work/watch.err" >&2; cat "$work/watch.err" >&2; exit 1; }
done
echo "$("$bin" --version), $("$java" -version 2>&1 | head -n 1), $(nproc) CPUs; ${windows} windows of ${window}s"
printf '  %-8s %12s %8s %14s %12s\n' window "watch CPU" stalls "CPU per stall" recording
: > "$work/per"
for w in $(seq "$windows"); do
  c0=$(threads_cpu_ns "$watch_pid"); s0=$(wc -l < "$work/events.jsonl"); t0=$(date +%s%N)
  sleep "$window"
  c1=$(threads_cpu_ns "$watch_pid"); s1=$(wc -l < "$work/events.jsonl"); t1=$(date +%s%N)
  n=$((s1 - s0))
  per=$(awk -v c=$((c1 - c0)) -v n="$n" 'BEGIN { if (n > 0) printf "%.2f", c / n / 1e6; else print "n/a" }')
  echo "$per" >> "$work/per"
  printf '  %-8s %11s%% %8s %11s ms %9s MB\n' "$w" "$(pct $((c1 - c0)) $((t1 - t0)))" "$n" "$per" \
    "$(du -sm "$work/rec" | awk '{ print $1 }')"
done
first=$(head -n 1 "$work/per"); last=$(tail -n 1 "$work/per")
echo "  watch's CPU per stall, last window / first: $(ratio "$last" "$first")x   goal: about 1 (flat as the recording grows)"
