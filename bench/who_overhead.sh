#!/usr/bin/env bash
# What looking for who set each stall off costs (docs/instigators.md): the recorder's
# `stallscope-who` thread, which is idle between stalls and, while one lasts, reads the VM
# operation and the JVM's safepoint state every 10 ms, and every process's CPU and I/O at the
# stall's first look and end. Each figure beside a reference from the same run:
#   1. a JVM frozen (SIGSTOP) for WINDOW s under `stallscope run`: the who thread's CPU, beside
#      the rest of the recorder's (sampling every thread at 500 Hz) and cyclictest waking at the
#      who thread's 100 Hz;
#   2. many short stalls (a safepoint every 20 ms beside 4 CPU hogs, WINDOW s): the who thread's
#      CPU per stall, beside the rest of the recorder's per stall, and `ps -e` (one look at every
#      process) timed on the same machine.
# Medians over RUNS runs, with min and max. CPU is read from /proc/<pid>/task/*/schedstat (ns).
#
#   bench/who_overhead.sh            # 10 s windows, 3 runs
#   bench/who_overhead.sh --quick    # 4 s windows, 3 runs
set -euo pipefail
source "$(dirname "$0")/lib.sh"

window=${WINDOW:-10}
runs=${RUNS:-3}
if [[ "${1:-}" == "--quick" ]]; then window=${WINDOW:-4}; fi
java=${JAVA:-java}
workloads="$root/java/workloads/target/stallscope-workloads.jar"
for need in "$bin" "$workloads"; do
  [[ -f "$need" ]] || { echo "who_overhead.sh: $need is missing; run make build first" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/stallscope-who-bench.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2> /dev/null || true; kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# who_and_rest_ns PID: CPU of PID's stallscope-who thread, and of its other threads (ns).
who_and_rest_ns() {
  local who=0 rest=0 t c
  for t in /proc/"$1"/task/*; do
    c=$(awk '{ print $1 }' "$t/schedstat" 2> /dev/null || echo 0)
    if [[ "$(cat "$t/comm" 2> /dev/null)" == "stallscope-who" ]]; then who=$((who + c)); else rest=$((rest + c)); fi
  done
  echo "$who $rest"
}
# jvm_of DIR: the pid the recording in DIR records, once it is up.
jvm_of() {
  until [[ -s "$1/meta.json" ]]; do sleep 0.05; done
  jq -r .pid "$1/meta.json"
}

echo "who_overhead: $(nproc) CPUs, ${window} s windows, $runs runs, $("$java" -version 2>&1 | head -1)"

frozen_who=() frozen_rest=()
for r in $(seq "$runs"); do
  rec="$work/frozen-$r"
  "$bin" run --out "$rec" -- "$java" -jar "$workloads" idle --duration "$((window + 6))s" > /dev/null 2>&1 &
  s=$!; pids+=("$s")
  jvm=$(jvm_of "$rec"); sleep 2
  read -r w0 r0 < <(who_and_rest_ns "$s")
  t0=$(date +%s%N)
  kill -STOP "$jvm"; sleep "$window"; kill -CONT "$jvm"
  read -r w1 r1 < <(who_and_rest_ns "$s")
  t1=$(date +%s%N)
  wait "$s" || true
  frozen_who+=("$(pct $((w1 - w0)) $((t1 - t0)))")
  frozen_rest+=("$(pct $((r1 - r0)) $((t1 - t0)))")
done
read -r fw fwmin fwmax < <(printf '%s\n' "${frozen_who[@]}" | median_spread)
read -r fr frmin frmax < <(printf '%s\n' "${frozen_rest[@]}" | median_spread)
read -r cy cymin cymax < <(cyclictest_cpu 100 "$window" "$runs" || echo "n/a n/a n/a")
echo
echo "1. frozen ${window} s (% of a core, median and min-max)"
echo "   stallscope-who thread       $fw  ($fwmin-$fwmax)"
echo "   rest of the recorder        $fr  ($frmin-$frmax)   who/rest = $(ratio "$fw" "$fr")"
echo "   cyclictest at 100 Hz        ${cy:-n/a}  (${cymin:-}-${cymax:-})   who/cyclictest = $(ratio "$fw" "${cy:-0}")"

per_who=() per_rest=() nstalls=()
for r in $(seq "$runs"); do
  "$bin" inject cpu-hog --threads 4 --for "$((window + 8))s" > /dev/null 2>&1 &
  h=$!; pids+=("$h")
  rec="$work/storm-$r"
  "$bin" run --out "$rec" -- "$java" -jar "$workloads" safepoint-storm --threads 2 --duration "$((window + 3))s" --every 20ms > /dev/null 2>&1 &
  s=$!; pids+=("$s")
  jvm_of "$rec" > /dev/null; sleep 2
  read -r w0 r0 < <(who_and_rest_ns "$s")
  sleep "$window"
  read -r w1 r1 < <(who_and_rest_ns "$s")
  wait "$s" || true
  kill "$h" 2> /dev/null || true; wait "$h" 2> /dev/null || true
  n=$(grep -c '"event":"stall-end"' "$rec/events.jsonl" || true)
  n=$(( n > 0 ? n : 1 ))
  # The stalls of the whole recording, against the window's CPU: a bound from below on the
  # stalls in the window (the window is most of the recording).
  nstalls+=("$n")
  per_who+=("$(( (w1 - w0) / n ))")
  per_rest+=("$(( (r1 - r0) / n ))")
done
read -r pw pwmin pwmax < <(printf '%s\n' "${per_who[@]}" | median_spread)
read -r pr prmin prmax < <(printf '%s\n' "${per_rest[@]}" | median_spread)
read -r ns _ _ < <(printf '%s\n' "${nstalls[@]}" | median_spread)
read -r ps psmin psmax < <(measure 9 ps -e -o pid,time,comm)
echo
echo "2. a safepoint every 20 ms beside 4 CPU hogs (${window} s, a median of $ns stalls a recording)"
echo "   stallscope-who per stall    $(awk -v n="$pw" 'BEGIN { printf "%.3f", n / 1e6 }') ms  ($(awk -v a="$pwmin" -v b="$pwmax" 'BEGIN { printf "%.3f-%.3f", a / 1e6, b / 1e6 }'))"
echo "   rest of the recorder        $(awk -v n="$pr" 'BEGIN { printf "%.3f", n / 1e6 }') ms  ($(awk -v a="$prmin" -v b="$prmax" 'BEGIN { printf "%.3f-%.3f", a / 1e6, b / 1e6 }'))   who/rest = $(ratio "$pw" "$pr")"
echo "   ps -e (one look at every    $(awk -v s="$ps" 'BEGIN { printf "%.3f", s * 1e3 }') ms  ($(awk -v a="$psmin" -v b="$psmax" 'BEGIN { printf "%.3f-%.3f", a * 1e3, b * 1e3 }'))   who per stall / ps = $(ratio "$pw" "$(awk -v s="$ps" 'BEGIN { printf "%.0f", s * 1e9 }')")"
echo "   process, $(ls -d /proc/[0-9]* | wc -l) processes)"
