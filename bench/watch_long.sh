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
# Then a stall's own cost: the same JVM watched stalling and idle, alternated (PAIRS, PAIR_WINDOW).
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
kill -TERM "$watch_pid" 2> /dev/null; wait "$watch_pid" 2> /dev/null || true; watch_pid=""
kill "$jvm" 2> /dev/null; wait "$jvm" 2> /dev/null || true; jvm=""

# What a stall itself costs: the same JVM watched stalling and watched idle (its loop running, no
# safepoint asked for: no stall at all, checked with the same JVM here), a window of each,
# alternated PAIRS times (the machine drifts over minutes). Per stall: watch's CPU (every
# thread), its context switches (wake-ups, from each thread's status) and its system calls
# (perf's raw_syscalls tracepoint, when perf is here), less the idle window's at the same length.
ctx_switches() { cat /proc/"$1"/task/*/status 2> /dev/null | awk '/ctxt_switches/ { s += $2 } END { print s + 0 }'; }
one_window() { # MODE (stall|idle): "cpu_ns stalls wall_ns switches syscalls"
  local args=(--rounds 20 --every 300ms) ev="$work/pair-events.jsonl" c0 c1 x0 x1 s0 s1 t0 t1 sc=0
  [[ $1 == idle ]] && args=(--rounds 20 --trigger none)
  "$java" -Xmx64m -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints -jar "$workloads" counted-loop \
    --duration "$((pair_window + 30))s" "${args[@]}" > "$work/pair-jvm.out" 2>&1 &
  jvm=$!
  until "$bin" counters "$jvm" sun.rt.safepoints > /dev/null 2>&1; do sleep 0.1; done
  rm -rf "$work/pair-rec" "$ev"
  "$bin" watch "$jvm" --out "$work/pair-rec" --events "$ev" > /dev/null 2> "$work/watch.err" &
  watch_pid=$!
  sleep 5
  cpu_by_thread_name "$watch_pid" > "$work/names-$1.0"
  c0=$(threads_cpu_ns "$watch_pid"); x0=$(ctx_switches "$watch_pid"); s0=$(cat "$ev" 2> /dev/null | wc -l); t0=$(date +%s%N)
  if command -v perf > /dev/null && perf stat -x, -e raw_syscalls:sys_enter -p "$watch_pid" -o "$work/perf.csv" -- sleep "$pair_window" 2> /dev/null; then
    sc=$(awk -F, '/sys_enter/ { print $1 }' "$work/perf.csv")
  else
    sleep "$pair_window"; sc=""
  fi
  c1=$(threads_cpu_ns "$watch_pid"); x1=$(ctx_switches "$watch_pid"); s1=$(cat "$ev" 2> /dev/null | wc -l); t1=$(date +%s%N)
  cpu_by_thread_name "$watch_pid" > "$work/names-$1.1"
  join "$work/names-$1.0" "$work/names-$1.1" | awk '{ print $1, $3 - $2 }' > "$work/names-$1"
  kill -TERM "$watch_pid"; wait "$watch_pid" 2> /dev/null || true; watch_pid=""
  kill "$jvm"; wait "$jvm" 2> /dev/null || true; jvm=""
  echo "$((c1 - c0)) $((s1 - s0)) $((t1 - t0)) $((x1 - x0)) ${sc:-0}"
}
pair_window=${PAIR_WINDOW:-20}
pairs=${PAIRS:-3}
[[ "${1:-}" == "--quick" ]] && pairs=${PAIRS:-2}
echo "-- a stall's own cost: the same JVM watched stalling, then idle (no safepoint held), ${pairs} pairs of ${pair_window}s windows"
: > "$work/pairs"; : > "$work/names-pairs"
for _ in $(seq "$pairs"); do
  read -r sc_ sn_ st_ sx_ ss_ < <(one_window stall)
  read -r ic_ _ it_ ix_ is_ < <(one_window idle)
  awk -v sc="$sc_" -v sn="$sn_" -v st="$st_" -v sx="$sx_" -v ss="$ss_" -v ic="$ic_" -v it="$it_" -v ix="$ix_" -v is="$is_" \
    'BEGIN { f = st / it; if (sn > 0) printf "%.3f %.1f %.0f %.3f %.3f %d\n", (sc - ic * f) / sn / 1e6, (sx - ix * f) / sn, (ss - is * f) / sn, 100 * sc / st, 100 * ic / it, sn }' >> "$work/pairs"
  # The same by thread name: where a stall's CPU goes.
  join -a 1 -e 0 -o 0,1.2,2.2 "$work/names-stall" "$work/names-idle" |
    awk -v sn="$sn_" -v f="$(awk -v st="$st_" -v it="$it_" 'BEGIN { print st / it }')" \
      'sn > 0 { printf "%s %.3f\n", $1, ($2 - $3 * f) / sn / 1e6 }' >> "$work/names-pairs"
done
read -r p_med p_min p_max < <(awk '{ print $1 }' "$work/pairs" | median_spread)
read -r x_med x_min x_max < <(awk '{ print $2 }' "$work/pairs" | median_spread)
read -r y_med y_min y_max < <(awk '{ print $3 }' "$work/pairs" | median_spread)
read -r w_med _ _ < <(awk '{ print $4 }' "$work/pairs" | median_spread)
read -r i_med _ _ < <(awk '{ print $5 }' "$work/pairs" | median_spread)
echo "  watch stalling: $w_med% of a core; the same JVM idle: $i_med% (the reference, same run); stalls a window: $(awk '{ print $6 }' "$work/pairs" | median_spread | cut -d' ' -f1)"
echo "  per stall beyond watching it idle: CPU $p_med ms ($p_min-$p_max), context switches $x_med ($x_min-$x_max), system calls $y_med ($y_min-$y_max)   goal: CPU <= 1 ms"
echo "  of which, by thread of watch (ms of CPU per stall, median and spread over the pairs):"
for name in $(awk '{ print $1 }' "$work/names-pairs" | sort -u); do
  read -r n_med n_min n_max < <(awk -v n="$name" '$1 == n { print $2 }' "$work/names-pairs" | median_spread)
  printf '    %-18s %7s (%s to %s)\n' "$name" "$n_med" "$n_min" "$n_max"
done

# Resident memory across long stalls: a stall of seconds keeps its evidence in memory until it is
# diagnosed; what the allocator then holds free must go back, or `watch` settles higher after each
# one (it did: 35 -> 82 MiB over three 16 s stalls, before 2026-12-01). The same JVM's loop holds
# each safepoint for several seconds (ROUNDS); the reference is watch's own memory before the
# first stall, in the same run.
rounds=${ROUNDS:-4000}
long_secs=${LONG_SECS:-72}
[[ "${1:-}" == "--quick" ]] && long_secs=${LONG_SECS:-48}
"$java" -Xmx64m -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints -jar "$workloads" counted-loop \
  --duration "$((long_secs + 30))s" --rounds "$rounds" --every 12s > "$work/long-jvm.out" 2>&1 &
jvm=$!
until "$bin" counters "$jvm" sun.rt.safepoints > /dev/null 2>&1; do sleep 0.1; done
rm -rf "$work/long-rec"
"$bin" watch "$jvm" --out "$work/long-rec" --events "$work/long-events.jsonl" > /dev/null 2> "$work/watch.err" &
watch_pid=$!
sleep 2
rss_kb() { awk '/^VmRSS/ { print $2 }' /proc/"$1"/status; }
before=$(rss_kb "$watch_pid"); last=$before; seen=0
echo "-- resident memory across long stalls (the loop holds each safepoint for seconds), ${long_secs}s"
for _ in $(seq $((long_secs / 2))); do
  sleep 2
  last=$(rss_kb "$watch_pid")
  n=$(cat "$work/long-events.jsonl" 2> /dev/null | wc -l)
  if [[ $n -gt $seen ]]; then
    seen=$n
    printf '  after stall %d (%s ms): %s KiB\n' "$n" \
      "$(tail -n 1 "$work/long-events.jsonl" | sed 's/.*"duration_ns":\([0-9]*\).*/\1/' | awk '{ printf "%.0f", $1 / 1e6 }')" "$last"
  fi
done
kill -TERM "$watch_pid" 2> /dev/null; wait "$watch_pid" 2> /dev/null || true; watch_pid=""
kill "$jvm" 2> /dev/null; wait "$jvm" 2> /dev/null || true; jvm=""
echo "  watch's resident memory: $before KiB before the first stall, $last KiB at the end: $(ratio "$last" "$before")x after $seen stalls   goal: about 1 (what a stall took is given back)"
