#!/usr/bin/env bash
# make demo: start a real JVM whose counted loop holds every other thread out of a safepoint,
# record its safepoint log, and show stallscope's analysis of it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/target/release/stallscope"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
javac --release 11 -d "$work" "$root/tests/fixtures/logs/src/FixtureWorkload.java"
echo "== A JVM (JDK $(java -version 2>&1 | awk -F'"' '/version/ {print $2}')) sums a byte array in a counted int loop"
echo "   under -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints, while main asks for a GC every second."
echo "   Safepoint logging and SafepointTimeout (200 ms) are on. This takes about 6 seconds."
java -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints -XX:+SafepointTimeout -XX:SafepointTimeoutDelay=200 \
     "-Xlog:safepoint*=debug:file=$work/safepoint.log:uptime,timenanos,level,tags" \
     -cp "$work" FixtureWorkload counted-loop 6 > /dev/null 2>&1 || true
echo "== stallscope logs $work/safepoint.log"
echo
"$bin" logs "$work/safepoint.log"
