#!/usr/bin/env bash
# Naming the culprit's code: stallscope (its stacks agent, and with --jfr JFR stacks and thread
# dumps, docs/frames.md) beside async-profiler 4.1 in
# its time-to-safepoint mode (`ttsp`, from Maven Central: tools.profiler:async-profiler), in one
# run, on JDK 17 and Temurin 25, on three stalls whose culprit method is known:
#   counted-loop  a counted loop without a safepoint poll (seed 004)   CountedLoop.invoke
#   mmap-fault    a MappedByteBuffer read on a slow disk (seed 000)   MappedRead (its reader lambda)
#   set-memory    a huge Unsafe.setMemory                             SetMemory.fill
# For each tool: in how many runs the culprit's method was named, the target's throughput
# (workload calls in the same time) as a ratio to the same JVM run alone, and the CPU time the
# whole run took (the JVM and, for stallscope, its recorder: user + system) per workload call, as
# a ratio to the JVM alone (for mmap-fault, which does a fixed amount of work, the CPU time
# itself). Needs root (slowfs,
# and async-profiler's perf events under perf_event_paranoid 2).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
reps=${REPS:-3}
jar="$root/java/workloads/target/stallscope-workloads.jar"
work=$(mktemp -d "$out/frames.XXXXXX")
slowfs_pid=""
cleanup() {
  [ -n "$slowfs_pid" ] && kill "$slowfs_pid" 2>/dev/null && wait "$slowfs_pid" 2>/dev/null || true
  mountpoint -q "$work/mnt" 2>/dev/null && fusermount3 -u "$work/mnt" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
[ "$(id -u)" -eq 0 ] || { echo "culprit_frames.sh: needs root (the slow disk, async-profiler's perf events)" >&2; exit 1; }

# async-profiler from Maven Central, its native library out of the jar.
ap_dir="$out/async-profiler-4.1"
if [ ! -s "$ap_dir/linux-x64/libasyncProfiler.so" ]; then
  mkdir -p "$ap_dir"
  mvn -q -B dependency:copy -Dartifact=tools.profiler:async-profiler:4.1 -DoutputDirectory="$ap_dir" >/dev/null
  # The JDK's own jar tool: unzip is not on every machine.
  (cd "$ap_dir" && jar xf async-profiler-4.1.jar linux-x64/libasyncProfiler.so)
fi
ap_so="$ap_dir/linux-x64/libasyncProfiler.so"

# The slow disk for mmap-fault.
mkdir -p "$work/back" "$work/mnt"
head -c $((16 << 20)) /dev/urandom > "$work/back/test.dat"
"$bin" inject slowfs "$work/back" "$work/mnt" --read-delay 300ms > "$work/slowfs.log" 2>&1 &
slowfs_pid=$!
for _ in $(seq 100); do mountpoint -q "$work/mnt" && break; sleep 0.05; done
mountpoint -q "$work/mnt" || { echo "culprit_frames.sh: the slow disk did not mount: $(cat "$work/slowfs.log")" >&2; exit 1; }

# scenario → "JVM flags|workload args|method"
declare -A scenario=(
  [counted-loop]="-XX:+UseParallelGC -XX:-UseCountedLoopSafepoints|counted-loop --duration 5s --rounds 30 --trigger threaddump --every 500ms|CountedLoop.invoke"
  [mmap-fault]="|mapped-read --file $work/mnt/test.dat --mode mmap --reads 2 --stride 4m --chunk 512k|MappedRead"
  [set-memory]="|set-memory --duration 5s --size-mb 512 --every 200ms|SetMemory.fill"
)

# run TOOL JAVA SCENARIO N: prints "named calls" for one run.
run() {
  local tool=$1 java=$2 name=$3 n=$4
  IFS='|' read -r flags wargs method <<<"${scenario[$name]}"
  local d
  d="$work/$(basename "$(dirname "$(dirname "$java")")")-$tool-$name-$n"
  mkdir -p "$d"
  [ "$name" = mmap-fault ] && "$bin" inject evict "$work/mnt/test.dat" > /dev/null
  local named=0
  # CPU seconds of the run: the tool's process and everything it waited for (the JVM under
  # `stallscope run`), user + system, as /usr/bin/time reports them.
  local timed=(/usr/bin/time -f '%U %S' -o "$d/cpu")
  case $tool in
    none)
      # shellcheck disable=SC2086
      timeout 120 "${timed[@]}" "$java" $flags -jar "$jar" $wargs > "$d/out" 2>/dev/null || true ;;
    async-profiler)
      # shellcheck disable=SC2086
      timeout 120 "${timed[@]}" "$java" -agentpath:"$ap_so"=start,ttsp,collapsed,file="$d/ap.collapsed" $flags -jar "$jar" $wargs > "$d/out" 2>/dev/null || true
      tr '/' '.' < "$d/ap.collapsed" 2>/dev/null | grep -q "$method" && named=1 ;;
    stallscope-no-frames)
      # shellcheck disable=SC2086
      timeout 120 "${timed[@]}" "$bin" run --no-frames --out "$d/rec" -- "$java" $flags -jar "$jar" $wargs > "$d/out" 2>"$d/err" || true ;;
    stallscope|stallscope-jfr)
      local how=()
      [ "$tool" = stallscope-jfr ] && how=(--jfr)
      # shellcheck disable=SC2086
      timeout 120 "${timed[@]}" "$bin" run "${how[@]}" --out "$d/rec" -- "$java" $flags -jar "$jar" $wargs > "$d/out" 2>"$d/err" || true
      "$bin" report --json "$d/rec" 2>/dev/null | jq -e --arg m "$method" '[.stalls[].findings[].culprits[].code.frames[]?.method | select(contains($m))] | length > 0' > /dev/null && named=1 ;;
  esac
  local calls
  calls=$( (grep '^{"workload"' "$d/out" | jq -r '.calls // empty' | head -1) 2>/dev/null || true)
  [ -n "$calls" ] || [ "$name" = mmap-fault ] || echo "culprit_frames.sh: $tool $name on $java printed no result line: $(tail -c 300 "$d/out" "$d/err" 2>/dev/null)" >&2
  local cpu
  cpu=$(awk '/^[0-9.]+ [0-9.]+$/ { print $1 + $2 }' "$d/cpu" 2>/dev/null | tail -1)
  echo "$named ${calls:-0} ${cpu:-0}"
}

median() { sort -n | awk '{ a[NR]=$1 } END { if (NR) print a[int((NR+1)/2)]; else print 0 }'; }

echo "culprit frames: stallscope (stacks agent; --jfr: JFR stacks and thread dumps) beside async-profiler 4.1 ttsp, $reps runs each; named = runs whose report names the culprit's method"
printf '  %-10s %-13s %-21s %7s %9s %12s %10s %13s\n' JDK scenario tool named calls throughput cpu/call naming-cost
for java in /usr/lib/jvm/java-17-openjdk-amd64/bin/java /usr/lib/jvm/temurin-25-jdk-amd64/bin/java; do
  jdk=$("$java" -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ {print $2}')
  for name in counted-loop mmap-fault set-memory; do
    base=""
    for tool in none async-profiler stallscope-no-frames stallscope stallscope-jfr; do
      named=0; calls=(); per=()
      for n in $(seq "$reps"); do
        read -r got c cpu < <(run "$tool" "$java" "$name" "$n")
        named=$((named + got)); calls+=("$c")
        # CPU seconds per call (per run for mmap-fault, whose work is fixed).
        per+=("$(awk -v t="$cpu" -v c="$c" -v fixed="$([ "$name" = mmap-fault ] && echo 1 || echo 0)" 'BEGIN { printf "%.9f", (fixed || c == 0) ? t : t / c }')")
      done
      med=$(printf '%s\n' "${calls[@]}" | median)
      cpu_med=$(printf '%s\n' "${per[@]}" | median)
      [ "$tool" = none ] && base=$med && cpu_base=$cpu_med
      [ "$tool" = stallscope-no-frames ] && cpu_recorder=$cpu_med
      tp=$( [ "$name" = mmap-fault ] && echo "—" || ratio "$med" "$base")
      shown=$(case $tool in none|stallscope-no-frames) echo "—" ;; *) echo "$named/$reps" ;; esac)
      # What naming the code adds to what runs anyway: async-profiler against the JVM alone,
      # stallscope against its own recorder without stacks.
      naming=$(case $tool in async-profiler) ratio "$cpu_med" "$cpu_base" ;; stallscope|stallscope-jfr) ratio "$cpu_med" "$cpu_recorder" ;; *) echo "—" ;; esac)
      printf '  %-10s %-13s %-21s %7s %9s %12s %10s %13s\n' "$jdk" "$name" "$tool" "$shown" "$med" "$tp" "$(ratio "$cpu_med" "$cpu_base")" "$naming"
    done
  done
done
echo "  (throughput: median workload calls against the same JVM alone; mmap-fault reads a fixed 2 chunks, so it has none;"
echo "   cpu/call: CPU seconds (user + system, the JVM and the tool's own processes) per workload call against the JVM alone;"
echo "   for mmap-fault the CPU seconds of the run;"
echo "   stallscope-no-frames is the recorder without stacks: the difference to stallscope is what naming the code costs;"
echo "   stallscope-jfr names it with JFR and thread dumps instead of the stacks agent;"
echo "   naming-cost: the CPU per call of naming the code against what runs without it: async-profiler against the JVM alone,"
echo "   stallscope against stallscope-no-frames)"
