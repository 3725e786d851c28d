# Shared helpers for the benchmarks: repeated timing with median and spread.
# Sourced by bench/*.sh. Times are wall-clock seconds, read from bash's own clock
# ($EPOCHREALTIME, to the microsecond) in `measure`: `date +%s%N` started two processes a run,
# 2.6-5 ms around a command that itself takes a few ms to a tenth of a second.

# measure N CMD...: runs CMD N times (output discarded), prints "median min max" in seconds.
measure() {
  local n=$1; shift
  local times=()
  for _ in $(seq "$n"); do
    local t0 t1
    t0=${EPOCHREALTIME/[.,]/}
    "$@" > /dev/null 2>&1
    t1=${EPOCHREALTIME/[.,]/}
    times+=("$(( (t1 - t0) * 1000 ))")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR]=$1 } END { printf "%.3f %.3f %.3f\n", a[int((NR+1)/2)]/1e9, a[1]/1e9, a[NR]/1e9 }'
}

# ratio A B: A/B to two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a/b; else print "n/a" }'; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/bench/out"
mkdir -p "$out"
# STALLSCOPE_BIN: another build to measure (an A/B of two commits), else the release build.
bin="${STALLSCOPE_BIN:-$root/target/release/stallscope}"

# median_spread: "median min max" of the numbers on stdin.
median_spread() { sort -g | awk '{ a[NR]=$1 } END { printf "%s %s %s\n", a[int((NR+1)/2)], a[1], a[NR] }'; }

# pct NS WINDOW_NS: NS as a percentage of WINDOW_NS (of one core, for CPU time).
pct() { awk -v n="$1" -v w="$2" 'BEGIN { printf "%.3f", 100 * n / w }'; }

# threads_cpu_ns PID: CPU time of every live thread of PID, in ns (%.0f: mawk's %d stops at 2^31).
threads_cpu_ns() { cat /proc/"$1"/task/*/schedstat 2> /dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }

# process_cpu_ns PID: CPU time of PID so far, in ns, threads that exited included (their time
# stays in the process's utime and stime, /proc/PID/stat, in clock ticks: 10 ms each). For a
# process that starts and ends threads as it goes (watch, a thread set per stall).
process_cpu_ns() {
  local hz; hz=$(getconf CLK_TCK)
  sed 's/.*) //' /proc/"$1"/stat 2> /dev/null | awk -v hz="$hz" '{ printf "%.0f\n", ($12 + $13) * 1e9 / hz }'
}

# cpu_by_thread_name PID: "name ns" lines, the CPU time so far of PID's live threads summed by
# thread name (spaces in names become _), sorted by name.
cpu_by_thread_name() {
  local t
  for t in /proc/"$1"/task/*; do
    printf '%s %s\n' "$(tr ' ' _ < "$t/comm" 2> /dev/null)" "$(cut -d' ' -f1 "$t/schedstat" 2> /dev/null)"
  done | awk 'NF == 2 { s[$1] += $2 } END { for (k in s) printf "%s %.0f\n", k, s[k] }' | sort
}

# named_threads_cpu_ns PID REGEX: the CPU time so far of PID's threads whose name matches REGEX.
named_threads_cpu_ns() {
  local t s=0 c
  for t in /proc/"$1"/task/*; do
    [[ $(cat "$t/comm" 2> /dev/null) =~ $2 ]] || continue
    c=$(cut -d' ' -f1 "$t/schedstat" 2> /dev/null) && s=$((s + ${c:-0}))
  done
  echo "$s"
}

# cyclictest_cpu HZ WINDOW RUNS: "median min max" % of a core that cyclictest (SCHED_OTHER, one
# thread) takes waking HZ times a second, over RUNS windows of WINDOW seconds: the floor for any
# watcher that wakes this often, on this machine, now. Empty when cyclictest is missing.
cyclictest_cpu() {
  local hz=$1 window=$2 runs=$3 cpid c0 c1 t0 t1 got=()
  command -v cyclictest > /dev/null && (( hz > 0 )) || return 0
  for _ in $(seq "$runs"); do
    cyclictest -q --default-system -t1 -i $(( 1000000 / hz )) -D "$((window + 2))s" > /dev/null 2>&1 &
    cpid=$!; sleep 1
    c0=$(threads_cpu_ns "$cpid"); t0=$(date +%s%N); sleep "$window"; c1=$(threads_cpu_ns "$cpid"); t1=$(date +%s%N)
    wait "$cpid" || true
    got+=("$(pct $((c1 - c0)) $((t1 - t0)))")
  done
  printf '%s\n' "${got[@]}" | median_spread
}

# bpf_ns: the run time of stallscope's BPF programs now loaded, in ns (the kernel counts it only
# while kernel.bpf_stats_enabled is 1; 0 without bpftool or jq).
bpf_ns() {
  command -v jq > /dev/null || { echo 0; return; }
  { bpftool prog show -j 2> /dev/null || /usr/sbin/bpftool prog show -j 2> /dev/null || echo '[]'; } |
    jq '[.[] | select(.name == "on_switch" or .name == "on_switch_btf" or .name == "on_waking" or .name == "on_sp_begin" or .name == "on_sp_end" or .name == "on_csd") | .run_time_ns // 0] | add // 0'
}
