#!/usr/bin/env bash
# `stallscope watch`'s cost at fleet scale, every figure beside a reference measured in the same
# run (issue 27):
#   N idle JVMs (1, 10, 50; 100 with FULL=1) watched from outside at the default 5 ms threshold:
#   watch's CPU (every thread of it, from schedstat) and wake-ups; the JVMs' own CPU with watch
#   and, just before, without it (watch puts nothing into them: the two must match).
#   References: cyclictest (SCHED_OTHER, one thread) waking at watch's own measured rate; and
#   jHiccup 2.0.11 (../shared/peers) at its default 1 ms in one idle JVM, measured as that JVM's
#   CPU less an idle JVM's without it. Goal: watching 50 JVMs costs less than one jHiccup in one.
#   Detection latency: a JVM whose safepoints wait on a loop without a poll, its safepoint log
#   on: from each safepoint's begin (the log's end less its total, CLOCK_MONOTONIC) to the stall
#   watch began for it, against the 5 ms threshold. Goal: within 2 ms.
# Medians over RUNS windows, with min and max.
#
#   bench/watch_overhead.sh              # 30 s windows, 3 runs, 1, 10 and 50 JVMs (about 15 minutes)
#   bench/watch_overhead.sh --quick      # 10 s windows, 1 run, 1 and 10 JVMs
#   COUNTS="1 20" WINDOW=20 bench/watch_overhead.sh
#   COUNTS=100 bench/watch_overhead.sh   # 100 small JVMs, if memory allows
#   ATTACH=1 COUNTS=10 bench/watch_overhead.sh   # the agent in each JVM (watch --attach), as before
#   STALLING=1 COUNTS=30 bench/watch_overhead.sh # 30 idle JVMs and one whose safepoints wait on a loop
#   PERF_OUT=/tmp/watch.data ... bench/watch_overhead.sh  # and a perf profile of watch (dwarf stacks)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

window=${WINDOW:-30}
runs=${RUNS:-3}
counts=${COUNTS:-"1 10 50"}
if [[ "${1:-}" == "--quick" ]]; then window=${WINDOW:-10}; runs=${RUNS:-1}; counts=${COUNTS:-"1 10"}; fi
java=${JAVA:-java}
workloads="$root/java/workloads/target/stallscope-workloads.jar"
jhiccup="$root/../shared/peers/jHiccup-2.0.11-SNAPSHOT.jar"
for need in "$bin" "$workloads"; do
  [[ -f "$need" ]] || { echo "watch_overhead.sh: $need is missing; run make build first" >&2; exit 1; }
done
attach_args=()
[[ -n "${ATTACH:-}" ]] && attach_args=(--attach)

work=$(mktemp -d "${TMPDIR:-/tmp}/stallscope-watch-bench.XXXXXX")
jvms=()
watch_pid=""
# As root, the kernel counts the BPF programs' time (watch's one recorder runs in every guarded
# JVM's context switches and wake-ups, so its cost is in none of watch's threads): switched on
# for the bench, back as it was at exit.
stats_was=""
if [[ $(id -u) -eq 0 && -w /proc/sys/kernel/bpf_stats_enabled ]]; then
  stats_was=$(cat /proc/sys/kernel/bpf_stats_enabled)
  echo 1 > /proc/sys/kernel/bpf_stats_enabled
fi
cleanup() {
  [[ -n "$watch_pid" ]] && kill -TERM "$watch_pid" 2> /dev/null && wait "$watch_pid" 2> /dev/null || true
  for p in "${jvms[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  [[ -n "$stats_was" ]] && echo "$stats_was" > /proc/sys/kernel/bpf_stats_enabled
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# (%.0f: mawk's %d stops at 2^31, 2.1 s of CPU.)
# watch's: every thread's, those ended in the window too (a stall's threads come and go).
cpu_ns() { process_cpu_ns "$1"; }
wakeups() { cat /proc/"$1"/task/*/schedstat 2> /dev/null | awk '{ s += $3 } END { printf "%.0f\n", s }'; }
# The CPU of every bench JVM, in ns.
jvms_cpu_ns() { local s=0; for p in "${jvms[@]}"; do s=$((s + $(threads_cpu_ns "$p"))); done; echo "$s"; }
# Threads of stallscope's inside the bench JVMs (the agent's are named stallscope-*).
ours_inside() { local n=0; for p in "${jvms[@]}"; do n=$((n + $(cat /proc/"$p"/task/*/comm 2> /dev/null | grep -c '^stallscope' || true))); done; echo "$n"; }

# A marker only this bench's JVMs carry, for --match.
mark="$((RANDOM % 900 + 100))7s"

# start_jvms N [JVM options...]: N idle JVMs, small heaps, one compiler thread; waits until each
# has started.
start_jvms() {
  local n=$1; shift
  for i in $(seq "$n"); do
    "$java" -Xmx16m -Xss256k -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -Xshare:auto "$@" \
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

# window_cpu: "% of a core" the bench JVMs took over one window, no watch running.
window_cpu() { local j0 j1 t0 t1; j0=$(jvms_cpu_ns); t0=$(date +%s%N); sleep "$window"; j1=$(jvms_cpu_ns); t1=$(date +%s%N); pct $((j1 - j0)) $((t1 - t0)); echo; }

echo "window ${window}s, ${runs} runs, $([[ -n "${ATTACH:-}" ]] && echo "with --attach (the agent in each JVM)" || echo "from outside (nothing in the JVMs)"), $("$java" -version 2>&1 | head -n 1), $(nproc) CPUs"

# jHiccup in one idle JVM: that JVM's CPU less an idle JVM's, in the same minutes.
jh_med=""
if [[ -f "$jhiccup" ]]; then
  echo
  echo "-- reference: jHiccup 2.0.11 at 1 ms in one idle JVM"
  : > "$work/jh"
  for _ in $(seq "$runs"); do
    start_jvms 1; a=$(window_cpu); stop_jvms
    start_jvms 1 "-javaagent:$jhiccup=-l,$work/jh.hlog"; b=$(window_cpu); stop_jvms
    awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f\n", b - a }' >> "$work/jh"
  done
  read -r jh_med jh_min jh_max < <(median_spread < "$work/jh")
  printf '  %-50s %7s%%  (%s-%s)\n' "jHiccup's own cost in one JVM" "$jh_med" "$jh_min" "$jh_max"
else
  echo "(no $jhiccup: the jHiccup reference is skipped)"
fi

for n in $counts; do
  echo
  watched=$n
  if [[ -n "${STALLING:-}" ]]; then
    echo "-- $n idle JVM(s) and one whose safepoints wait on a loop (20 rounds, every 300 ms), threshold 5ms: CPU as % of one core"
  else
    echo "-- $n idle JVM(s), threshold 5ms: CPU as % of one core"
  fi
  start_jvms "$n"
  if [[ -n "${STALLING:-}" ]]; then
    "$java" -Xmx64m -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints -jar "$workloads" counted-loop \
      --duration "$mark" --rounds 20 --every 300ms > "$work/stalling.out" 2>&1 &
    jvms+=("$!"); watched=$((n + 1))
  fi
  # Each run: a window of the JVMs alone, then one watched (watch started afresh, after it has
  # taken every JVM and settled): the JVMs' own CPU drifts over minutes, so each watched window is
  # set beside the alone one just before it.
  : > "$work/w"
  for _ in $(seq "$runs"); do
    alone=$(window_cpu)
    rm -rf "$work/rec"
    "$bin" watch --match "(idle|counted-loop) --duration $mark" --out "$work/rec" "${attach_args[@]}" > "$work/watch.out" 2> "$work/watch.err" &
    watch_pid=$!
    t_wait=$(date +%s)
    until (( $(ls "$work/rec" 2> /dev/null | wc -l) >= watched )); do
      sleep 0.5
      if (( $(date +%s) - t_wait > 30 + 3 * watched )); then echo "watch_overhead.sh: only $(ls "$work/rec" | wc -l) of $watched JVMs watched; see $work/watch.err" >&2; cat "$work/watch.err" >&2; exit 1; fi
    done
    sleep 5
    c0=$(cpu_ns "$watch_pid"); w0=$(wakeups "$watch_pid"); j0=$(jvms_cpu_ns); b0=$(bpf_ns); t0=$(date +%s%N)
    # PERF_OUT=FILE: a profile of watch over the window (perf's own cost then shows in the figures).
    if [[ -n "${PERF_OUT:-}" ]]; then
      perf record -q -F 999 --call-graph dwarf,16000 -p "$watch_pid" -o "$PERF_OUT" -- sleep "$window" > /dev/null 2>&1
    else
      sleep "$window"
    fi
    c1=$(cpu_ns "$watch_pid"); w1=$(wakeups "$watch_pid"); j1=$(jvms_cpu_ns); b1=$(bpf_ns); t1=$(date +%s%N)
    inside=$(ours_inside)
    # Its peak resident memory, MiB: what a DaemonSet's memory request is set from.
    hwm=$(awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' /proc/"$watch_pid"/status)
    kill -TERM "$watch_pid"; wait "$watch_pid" || true; watch_pid=""
    echo "$(pct $((c1 - c0)) $((t1 - t0))) $(( (w1 - w0) * 1000000000 / (t1 - t0) )) $(pct $((j1 - j0)) $((t1 - t0))) $alone $inside $hwm $(pct $((b1 - b0)) $((t1 - t0))) $(pct $((c1 - c0 + b1 - b0)) $((t1 - t0)))" >> "$work/w"
  done
  read -r w_med w_min w_max < <(awk '{ print $1 }' "$work/w" | median_spread)
  read -r hz _ _ < <(awk '{ print $2 }' "$work/w" | median_spread)
  read -r j_med j_min j_max < <(awk '{ print $3 }' "$work/w" | median_spread)
  read -r a_med a_min a_max < <(awk '{ print $4 }' "$work/w" | median_spread)
  read -r r_med r_min r_max < <(awk '$4 > 0 { printf "%.3f\n", $3 / $4 }' "$work/w" | median_spread)
  inside=$(awk '{ s += $5 } END { print s }' "$work/w")
  read -r m_med m_min m_max < <(awk '{ print $6 }' "$work/w" | median_spread)
  read -r b_med b_min b_max < <(awk '{ print $7 }' "$work/w" | median_spread)
  read -r t_med t_min t_max < <(awk '{ print $8 }' "$work/w" | median_spread)
  printf '  %-50s %7s%%  (%s-%s), %s wake-ups/s\n' "stallscope watch, $n JVM(s)" "$w_med" "$w_min" "$w_max" "$hz"
  if [[ -n "$stats_was" ]]; then
    printf '  %-50s %7s%%  (%s-%s)\n' "its BPF programs (kernel time, in others' switches)" "$b_med" "$b_min" "$b_max"
    printf '  %-50s %7s%%  (%s-%s)\n' "watch and its BPF programs" "$t_med" "$t_min" "$t_max"
  fi
  printf '  %-50s %7s%%  (%s-%s)\n' "the $n JVMs themselves, watched" "$j_med" "$j_min" "$j_max"
  printf '  %-50s %7s%%  (%s-%s)\n' "the $n JVMs themselves, alone (the window before)" "$a_med" "$a_min" "$a_max"
  echo "  the JVMs watched / alone, per run: $r_med ($r_min-$r_max); stallscope threads inside the JVMs: $inside"
  echo "  watch's peak resident memory: $m_med MiB ($m_min-$m_max)"
  read -r c_med c_min c_max < <(cyclictest_cpu "$hz" "$window" "$runs") || true
  if [[ -n "$c_med" ]]; then
    printf '  %-50s %7s%%  (%s-%s)\n' "reference: cyclictest at the same $hz Hz" "$c_med" "$c_min" "$c_max"
    echo "  watch / cyclictest: $(ratio "$w_med" "$c_med")x"
  else
    echo "  (cyclictest not found: apt-get install rt-tests for the wake-up reference)"
  fi
  [[ -n "$jh_med" ]] && echo "  watch / jHiccup in one JVM: $(ratio "$w_med" "$jh_med")x   goal: < 1 with 50 JVMs"
  [[ -n "$jh_med" && -n "$stats_was" ]] && echo "  watch and its BPF programs / jHiccup in one JVM: $(ratio "$t_med" "$jh_med")x"
  stop_jvms
done

# Detection latency: safepoints held by a loop without a poll, each begin from the JVM's own log.
echo
echo "-- detection latency: from a safepoint's begin (its log) to the stall watch began, threshold 5 ms"
"$java" -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints -Xlog:safepoint*=debug:file="$work/sp.log":uptime,timenanos \
  -jar "$workloads" counted-loop --rounds 20 --duration "$((window + 10))s" --every 300ms > "$work/loop.out" 2>&1 &
jvms+=("$!")
until "$bin" counters "${jvms[0]}" sun.rt.safepoints > /dev/null 2>&1; do sleep 0.1; done
rm -rf "$work/rec"
"$bin" watch "${jvms[0]}" --out "$work/rec" --for "$((window + 5))s" "${attach_args[@]}" > /dev/null 2> "$work/watch.err" &
watch_pid=$!
wait "$watch_pid" || true; watch_pid=""
stop_jvms
# Each safepoint's begin: its "Safepoint synchronization initiated" line, stamped as HotSpot
# begins it (its record's Total, subtracted from the record's own stamp, is off by up to a few
# ms on JDK 17: the record is stamped as it is printed). The stall watch began after it, within
# a second: each stall's latency from its safepoint's begin, less the threshold.
grep 'synchronization initiated' "$work/sp.log" | sed 's/.*\]\[\([0-9]*\)ns\].*/\1/' > "$work/begins"
cat "$work"/rec/*/events.jsonl | grep '"stall-begin"' | sed 's/.*"t":\([0-9]*\).*/\1/' > "$work/noticed"
awk 'NR == FNR { b[n++] = $1; next } { best = -1; for (i = 0; i < n; i++) if (b[i] <= $1 && $1 - b[i] < 1000000000) best = i; if (best >= 0) printf "%.3f\n", ($1 - b[best]) / 1e6 - 5 }' "$work/begins" "$work/noticed" > "$work/lat"
if [[ -s "$work/lat" ]]; then
  read -r l_med l_min l_max < <(median_spread < "$work/lat")
  echo "  noticed after the threshold: median $l_med ms ($l_min to $l_max), $(wc -l < "$work/lat") stalls, $(wc -l < "$work/begins") safepoints; goal: within 2 ms"
else
  echo "  no stall was matched to a safepoint (see $work)"
fi
