#!/usr/bin/env bash
# What the BPF off-CPU recorder (crates/offcpu) costs, each figure beside a reference measured in
# the same run (issue 41's budgets). Root only. The programs' own time is the kernel's count
# (sysctl kernel.bpf_stats_enabled=1, switched back off at exit): run_time_ns of on_switch
# and on_waking, read with bpftool; the sidecar's from its threads' schedstat.
#   1. a JVM with 200 threads frozen for 5 s, under `run` and under `run --no-bpf`: the sidecar's
#      CPU plus the programs' (goal: the BPF path <= 1% of a core);
#   2. an idle JVM under `run`, the same two ways (goal: the programs' time at its floor);
#   3. a machine busy with other processes' context switches (hackbench, from rt-tests) beside an
#      idle JVM under `run`, with and without BPF: hackbench's time, and the programs' time as a
#      share of a core (goal: <= 1% of a core added);
#   4. watch over WATCH_JVMS (20; quick 10) idle JVMs, with its one program and with --no-bpf;
#   5. a CPU-bound JVM's throughput under run, with and without BPF, against it alone (goal >= 0.99);
#   6. an idle JVM under run (sidecar + BPF + the agent; the recorder woken by the BPF watchdog),
#      at run's default (5 ms as root, the JVM's safepoint probes timing its safepoints) and at
#      --resolution 1ms (jHiccup's), against jHiccup at 1 ms (goal <= 0.5x).
# Medians over RUNS runs, with min and max.
#
#   bench/bpf_overhead.sh            # 3 runs, 10 s idle windows
#   bench/bpf_overhead.sh --quick    # 2 runs, 4 s idle windows
#   SECTIONS="2 6" bench/bpf_overhead.sh --quick   # only those sections
set -euo pipefail
source "$(dirname "$0")/lib.sh"

runs=${RUNS:-3}
window=${WINDOW:-10}
if [[ "${1:-}" == "--quick" ]]; then runs=${RUNS:-2}; window=${WINDOW:-4}; fi
java=${JAVA:-java}
workloads="$root/java/workloads/target/stallscope-workloads.jar"
[[ $(id -u) -eq 0 ]] || { echo "bpf_overhead.sh: needs root (BPF)" >&2; exit 1; }
for need in "$bin" "$workloads"; do
  [[ -f "$need" ]] || { echo "bpf_overhead.sh: $need is missing; run make build first" >&2; exit 1; }
done
for tool in jq bpftool hackbench; do
  command -v "$tool" > /dev/null || [[ -x /usr/sbin/$tool ]] || { echo "bpf_overhead.sh: $tool not found (scripts/setup.sh installs it)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/stallscope-bpf-bench.XXXXXX")
stats_was=$(cat /proc/sys/kernel/bpf_stats_enabled)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  echo "$stats_was" > /proc/sys/kernel/bpf_stats_enabled
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
echo 1 > /proc/sys/kernel/bpf_stats_enabled
# SECTIONS="2 6" runs only those sections.
section() { [[ " ${SECTIONS:-1 2 3 4 5 6} " == *" $1 "* ]]; }

# child_of PID: the java process under the sidecar.
child_of() {
  local c=""
  until [[ -n "$c" ]]; do
    kill -0 "$1" 2> /dev/null || { echo "bpf_overhead.sh: stallscope (pid $1) exited before starting its JVM" >&2; return 1; }
    c=$(pgrep -P "$1" | head -n 1 || true); sleep 0.05
  done
  echo "$c"
}
# mode_args MODE: the run options of "bpf" or "proc".
mode_args() { [[ $1 == bpf ]] && echo "" || echo "--no-bpf"; }

echo "$("$java" -version 2>&1 | head -n 1); $(nproc) CPUs; ${runs} runs"
echo

if section 1; then
echo "-- 1. a JVM with 200 threads frozen for 5 s: % of one core during the freeze"
for mode in bpf proc; do : > "$work/freeze-$mode"; done
for r in $(seq "$runs"); do
  for mode in bpf proc; do
    # shellcheck disable=SC2046
    "$bin" run $(mode_args $mode) --out "$work/rec-freeze-$mode-$r" -- "$java" -jar "$workloads" idle --threads 200 --duration 12s > "$work/freeze-$mode-$r.out" 2>&1 &
    ss=$!; pids+=("$ss")
    jvm=$(child_of "$ss")
    sleep 4
    s0=$(threads_cpu_ns "$ss"); b0=$(bpf_ns); t0=$(date +%s%N)
    "$bin" inject freeze "$jvm" --for 5s > /dev/null
    s1=$(threads_cpu_ns "$ss"); b1=$(bpf_ns); t1=$(date +%s%N)
    wait "$ss" || true
    echo "$(pct $((s1 - s0)) $((t1 - t0))) $(pct $((b1 - b0)) $((t1 - t0)))" >> "$work/freeze-$mode"
  done
done
read -r fs_med fs_min fs_max < <(awk '{ print $1 }' "$work/freeze-bpf" | median_spread)
read -r fb_med fb_min fb_max < <(awk '{ print $2 }' "$work/freeze-bpf" | median_spread)
read -r ps_med ps_min ps_max < <(awk '{ print $1 }' "$work/freeze-proc" | median_spread)
printf '  %-52s %8s%%  (%s-%s)\n' "BPF programs (kernel time, all CPUs)" "$fb_med" "$fb_min" "$fb_max"
printf '  %-52s %8s%%  (%s-%s)\n' "sidecar with BPF (its /proc sampling goes on)" "$fs_med" "$fs_min" "$fs_max"
printf '  %-52s %8s%%  (%s-%s)\n' "reference: sidecar with --no-bpf (/proc alone)" "$ps_med" "$ps_min" "$ps_max"
echo "  BPF programs / the /proc sidecar: $(ratio "$fb_med" "$ps_med")x   goal: BPF <= 1% of a core"
echo
fi

if section 2; then
echo "-- 2. an idle JVM under run, ${window} s windows: % of one core"
for mode in bpf proc; do : > "$work/idle-$mode"; done
for r in $(seq "$runs"); do
  for mode in bpf proc; do
    # shellcheck disable=SC2046
    "$bin" run $(mode_args $mode) --out "$work/rec-idle-$mode-$r" -- "$java" -jar "$workloads" idle --duration $((window + 6))s > /dev/null 2>&1 &
    ss=$!; pids+=("$ss")
    jvm=$(child_of "$ss")
    sleep 3
    s0=$(threads_cpu_ns "$ss"); j0=$(threads_cpu_ns "$jvm"); b0=$(bpf_ns); t0=$(date +%s%N)
    sleep "$window"
    s1=$(threads_cpu_ns "$ss"); j1=$(threads_cpu_ns "$jvm"); b1=$(bpf_ns); t1=$(date +%s%N)
    wait "$ss" || true
    echo "$(pct $((s1 - s0)) $((t1 - t0))) $(pct $((b1 - b0)) $((t1 - t0))) $(pct $((j1 - j0)) $((t1 - t0)))" >> "$work/idle-$mode"
  done
done
read -r is_med is_min is_max < <(awk '{ print $1 }' "$work/idle-bpf" | median_spread)
read -r ib_med ib_min ib_max < <(awk '{ print $2 }' "$work/idle-bpf" | median_spread)
read -r ij_med ij_min ij_max < <(awk '{ print $3 }' "$work/idle-bpf" | median_spread)
read -r ps_med ps_min ps_max < <(awk '{ print $1 }' "$work/idle-proc" | median_spread)
read -r pj_med pj_min pj_max < <(awk '{ print $3 }' "$work/idle-proc" | median_spread)
printf '  %-52s %8s%%  (%s-%s)\n' "BPF programs (kernel time)" "$ib_med" "$ib_min" "$ib_max"
printf '  %-52s %8s%%  (%s-%s)\n' "sidecar with BPF" "$is_med" "$is_min" "$is_max"
printf '  %-52s %8s%%  (%s-%s)\n' "reference: sidecar with --no-bpf" "$ps_med" "$ps_min" "$ps_max"
printf '  %-52s %8s%%  (%s-%s)\n' "the JVM, with BPF" "$ij_med" "$ij_min" "$ij_max"
printf '  %-52s %8s%%  (%s-%s)\n' "reference: the JVM, with --no-bpf" "$pj_med" "$pj_min" "$pj_max"
echo "  sidecar + BPF / sidecar alone: $(awk -v a="$is_med" -v b="$ib_med" -v c="$ps_med" 'BEGIN { if (c > 0) printf "%.2f", (a + b) / c; else print "n/a" }')x"
echo
fi

if section 3; then
echo "-- 3. hackbench (other processes' context switches) beside an idle JVM under run"
for mode in bpf proc none; do : > "$work/hb-$mode"; done
for r in $(seq "$runs"); do
  for mode in bpf proc none; do
    ss=""
    if [[ $mode != none ]]; then
      # shellcheck disable=SC2046
      "$bin" run $(mode_args $mode) --out "$work/rec-hb-$mode-$r" -- "$java" -jar "$workloads" idle --duration 60s > /dev/null 2>&1 &
      ss=$!; pids+=("$ss")
      child_of "$ss" > /dev/null
      sleep 3
    fi
    b0=$(bpf_ns); t0=$(date +%s%N)
    hackbench -s 512 -l 2000 -g 8 -f 10 -P > /dev/null 2>&1
    b1=$(bpf_ns); t1=$(date +%s%N)
    [[ -n $ss ]] && { kill -INT "$ss" 2> /dev/null || true; wait "$ss" || true; }
    echo "$(awk -v t=$((t1 - t0)) 'BEGIN { printf "%.3f", t / 1e9 }') $(pct $((b1 - b0)) $((t1 - t0)))" >> "$work/hb-$mode"
  done
done
read -r hb_med hb_min hb_max < <(awk '{ print $1 }' "$work/hb-bpf" | median_spread)
read -r hbb_med hbb_min hbb_max < <(awk '{ print $2 }' "$work/hb-bpf" | median_spread)
read -r hp_med hp_min hp_max < <(awk '{ print $1 }' "$work/hb-proc" | median_spread)
read -r hn_med hn_min hn_max < <(awk '{ print $1 }' "$work/hb-none" | median_spread)
printf '  %-52s %8s s  (%s-%s)\n' "hackbench beside run (BPF)" "$hb_med" "$hb_min" "$hb_max"
printf '  %-52s %8s s  (%s-%s)\n' "hackbench beside run --no-bpf" "$hp_med" "$hp_min" "$hp_max"
printf '  %-52s %8s s  (%s-%s)\n' "reference: hackbench alone" "$hn_med" "$hn_min" "$hn_max"
printf '  %-52s %8s%%  (%s-%s)\n' "BPF programs during hackbench (kernel time)" "$hbb_med" "$hbb_min" "$hbb_max"
echo "  hackbench time, BPF / --no-bpf: $(ratio "$hb_med" "$hp_med")x; / alone: $(ratio "$hb_med" "$hn_med")x   goal: BPF <= 1% of a core added"
echo
fi

if section 4; then
n=${WATCH_JVMS:-20}
if [[ "${1:-}" == "--quick" ]]; then n=${WATCH_JVMS:-10}; fi
echo "-- 4. watch over $n idle JVMs (from outside), ${window} s windows: % of one core"
mark="$((window * runs * 4 + 120))s"
jvms=()
for _ in $(seq "$n"); do
  "$java" -Xmx16m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -jar "$workloads" idle --duration "$mark" > /dev/null 2>&1 &
  jvms+=("$!"); pids+=("$!")
done
sleep 3
for mode in bpf proc; do : > "$work/watch-$mode"; done
for r in $(seq "$runs"); do
  for mode in bpf proc; do
    rm -rf "$work/rec-watch"
    # shellcheck disable=SC2046
    "$bin" watch $(mode_args $mode) --match "idle --duration $mark" --out "$work/rec-watch" > /dev/null 2>&1 &
    ws=$!; pids+=("$ws")
    until (( $(ls "$work/rec-watch" 2> /dev/null | wc -l) >= n )); do sleep 0.5; done
    sleep 3
    s0=$(threads_cpu_ns "$ws"); b0=$(bpf_ns); t0=$(date +%s%N)
    sleep "$window"
    s1=$(threads_cpu_ns "$ws"); b1=$(bpf_ns); t1=$(date +%s%N)
    kill -TERM "$ws"; wait "$ws" || true
    echo "$(pct $((s1 - s0)) $((t1 - t0))) $(pct $((b1 - b0)) $((t1 - t0)))" >> "$work/watch-$mode"
  done
done
for p in "${jvms[@]}"; do kill "$p" 2> /dev/null || true; done
read -r ws_med ws_min ws_max < <(awk '{ print $1 }' "$work/watch-bpf" | median_spread)
read -r wb_med wb_min wb_max < <(awk '{ print $2 }' "$work/watch-bpf" | median_spread)
read -r wp_med wp_min wp_max < <(awk '{ print $1 }' "$work/watch-proc" | median_spread)
printf '  %-52s %8s%%  (%s-%s)\n' "BPF program (one for the host, kernel time)" "$wb_med" "$wb_min" "$wb_max"
printf '  %-52s %8s%%  (%s-%s)\n' "watch with BPF" "$ws_med" "$ws_min" "$ws_max"
printf '  %-52s %8s%%  (%s-%s)\n' "reference: watch --no-bpf" "$wp_med" "$wp_min" "$wp_max"
echo "  (watch + BPF) / watch --no-bpf: $(awk -v a="$ws_med" -v b="$wb_med" -v c="$wp_med" 'BEGIN { if (c > 0) printf "%.2f", (a + b) / c; else print "n/a" }')x"
echo
fi

if section 5; then
echo "-- 5. a CPU-bound JVM ($(nproc) busy threads): work items in ${window} s"
javac -nowarn --release 11 -d "$work/classes" "$root/java/agent/bench/Workload.java"
for mode in bpf proc none; do : > "$work/busy-$mode"; done
for _ in $(seq "$runs"); do
  for mode in bpf proc none; do
    cmd=("$java" -cp "$work/classes" Workload busy 3 "$window")
    if [[ $mode == none ]]; then
      "${cmd[@]}" < /dev/null 2>&1 | awk '/^end / { print $2 }' >> "$work/busy-$mode"
    else
      rm -rf "$work/rec-busy"
      # shellcheck disable=SC2046
      "$bin" run $(mode_args $mode) --out "$work/rec-busy" -- "${cmd[@]}" < /dev/null 2>&1 | awk '/^end / { print $2 }' >> "$work/busy-$mode"
    fi
  done
done
read -r bb_med bb_min bb_max < <(median_spread < "$work/busy-bpf")
read -r bp_med bp_min bp_max < <(median_spread < "$work/busy-proc")
read -r bn_med bn_min bn_max < <(median_spread < "$work/busy-none")
printf '  %-52s %12s (%s-%s)\n' "under run (BPF)" "$bb_med" "$bb_min" "$bb_max"
printf '  %-52s %12s (%s-%s)\n' "under run --no-bpf" "$bp_med" "$bp_min" "$bp_max"
printf '  %-52s %12s (%s-%s)\n' "reference: the same JVM alone" "$bn_med" "$bn_min" "$bn_max"
echo "  throughput, BPF / alone: $(awk -v a="$bb_med" -v b="$bn_med" 'BEGIN { printf "%.4f", a / b }'); --no-bpf / alone: $(awk -v a="$bp_med" -v b="$bn_med" 'BEGIN { printf "%.4f", a / b }')   goal >= 0.99"
echo
fi

if section 6; then
jhiccup="$root/../shared/peers/jHiccup-2.0.11-SNAPSHOT.jar"
echo "-- 6. an idle JVM: stallscope run (sidecar + agent + BPF) against jHiccup 2.0.11 at 1 ms, ${window} s windows"
if [[ -f "$jhiccup" ]]; then
  : > "$work/jh"; : > "$work/jhd"; : > "$work/ss-1"; : > "$work/ss-5"; : > "$work/ssd-1"; : > "$work/ssd-5"
  warm=${WARM:-8}
  for r in $(seq "$runs"); do
    # The same idle JVM three ways, each window's CPU: alone, with jHiccup, under run. Two
    # figures each: the whole JVM's CPU less alone's (what it costs, with the JIT's and GC's
    # noise), and the observers' own threads (jHiccup's Hiccup* threads; the sidecar, the BPF
    # programs and the agent's stallscope-* threads), which that noise does not reach.
    "$java" -jar "$workloads" idle --duration $((window + warm + 2))s > /dev/null 2>&1 &
    p=$!; pids+=("$p"); sleep "$warm"
    a0=$(threads_cpu_ns "$p"); t0=$(date +%s%N); sleep "$window"; a1=$(threads_cpu_ns "$p"); t1=$(date +%s%N)
    wait "$p" || true
    alone=$(pct $((a1 - a0)) $((t1 - t0)))
    "$java" "-javaagent:$jhiccup=-l,$work/jh-$r.hlog" -jar "$workloads" idle --duration $((window + warm + 2))s > /dev/null 2>&1 &
    p=$!; pids+=("$p"); sleep "$warm"
    a0=$(threads_cpu_ns "$p"); h0=$(named_threads_cpu_ns "$p" '^Hiccup'); t0=$(date +%s%N); sleep "$window"
    a1=$(threads_cpu_ns "$p"); h1=$(named_threads_cpu_ns "$p" '^Hiccup'); t1=$(date +%s%N)
    wait "$p" || true
    awk -v b="$(pct $((a1 - a0)) $((t1 - t0)))" -v a="$alone" 'BEGIN { printf "%.3f\n", b - a }' >> "$work/jh"
    echo "$(pct $((h1 - h0)) $((t1 - t0)))" >> "$work/jhd"
    # Under run at its default resolution (5 ms here: root, BPF, the JVM's safepoint probes),
    # and at --resolution 1ms (jHiccup's).
    for res in 5 1; do
      if [[ $res == 5 ]]; then resarg=(); else resarg=(--resolution 1ms); fi
      "$bin" run "${resarg[@]}" --threshold 5ms --out "$work/rec-jh-$r-$res" -- "$java" -jar "$workloads" idle --duration $((window + warm + 3))s > /dev/null 2>&1 &
      ss=$!; pids+=("$ss"); jvm=$(child_of "$ss"); sleep "$warm"
      s0=$(threads_cpu_ns "$ss"); j0=$(threads_cpu_ns "$jvm"); g0=$(named_threads_cpu_ns "$jvm" '^stallscope'); b0=$(bpf_ns); t0=$(date +%s%N)
      sleep "$window"
      s1=$(threads_cpu_ns "$ss"); j1=$(threads_cpu_ns "$jvm"); g1=$(named_threads_cpu_ns "$jvm" '^stallscope'); b1=$(bpf_ns); t1=$(date +%s%N)
      wait "$ss" || true
      awk -v s="$(pct $((s1 - s0)) $((t1 - t0)))" -v j="$(pct $((j1 - j0)) $((t1 - t0)))" -v b="$(pct $((b1 - b0)) $((t1 - t0)))" -v a="$alone" \
        'BEGIN { printf "%.3f\n", s + b + j - a }' >> "$work/ss-$res"
      awk -v s="$(pct $((s1 - s0)) $((t1 - t0)))" -v g="$(pct $((g1 - g0)) $((t1 - t0)))" -v b="$(pct $((b1 - b0)) $((t1 - t0)))" \
        'BEGIN { printf "%.3f\n", s + b + g }' >> "$work/ssd-$res"
    done
  done
  read -r jh_med jh_min jh_max < <(median_spread < "$work/jh")
  read -r ss_med ss_min ss_max < <(median_spread < "$work/ss-1")
  read -r s10_med s10_min s10_max < <(median_spread < "$work/ss-5")
  printf '  %-52s %8s%%  (%s-%s)\n' "stallscope run (its default: the meter at 5 ms)" "$s10_med" "$s10_min" "$s10_max"
  printf '  %-52s %8s%%  (%s-%s)\n' "the same, run --resolution 1ms" "$ss_med" "$ss_min" "$ss_max"
  printf '  %-52s %8s%%  (%s-%s)\n' "reference: jHiccup at 1 ms (the JVM's CPU less alone)" "$jh_med" "$jh_min" "$jh_max"
  echo "  stallscope / jHiccup: $(ratio "$s10_med" "$jh_med")x by default (5 ms), $(ratio "$ss_med" "$jh_med")x at --resolution 1ms   goal <= 0.5x"
  read -r jd_med jd_min jd_max < <(median_spread < "$work/jhd")
  read -r sd_med sd_min sd_max < <(median_spread < "$work/ssd-1")
  read -r sd10_med sd10_min sd10_max < <(median_spread < "$work/ssd-5")
  echo "  the observers' own threads only:"
  printf '  %-52s %8s%%  (%s-%s)\n' "stallscope: sidecar + BPF + stallscope-* threads" "$sd10_med" "$sd10_min" "$sd10_max"
  printf '  %-52s %8s%%  (%s-%s)\n' "the same, --resolution 1ms" "$sd_med" "$sd_min" "$sd_max"
  printf '  %-52s %8s%%  (%s-%s)\n' "reference: jHiccup's Hiccup* threads at 1 ms" "$jd_med" "$jd_min" "$jd_max"
  echo "  stallscope / jHiccup: $(ratio "$sd10_med" "$jd_med")x by default (5 ms), $(ratio "$sd_med" "$jd_med")x at --resolution 1ms   goal <= 0.5x"
else
  echo "  ($jhiccup not found: skipped)"
fi
fi
