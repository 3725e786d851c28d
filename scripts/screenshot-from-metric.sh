#!/usr/bin/env bash
# From an alert's metric to the stall's explanation, as a person paged would go: `watch --metrics`
# over a real JVM whose safepoint waits on a counted loop, its stall counter scraped, the report
# its OpenMetrics exemplar links to opened in headless Chromium, and a screenshot of that page
# written to docs/report-from-metric.png (or $OUT). Prints the series and the link it followed.
# Usage: scripts/screenshot-from-metric.sh   (after make build; needs java, curl and chromium)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/target/release/stallscope"
workloads="$root/java/workloads/target/stallscope-workloads.jar"
out=${OUT:-$root/docs/report-from-metric.png}
for need in "$bin" "$workloads"; do
  [[ -f "$need" ]] || { echo "screenshot-from-metric.sh: $need is missing; run make build first" >&2; exit 1; }
done
work=$(mktemp -d)
jvm=""
watch_pid=""
cleanup() {
  [[ -n "$watch_pid" ]] && kill -TERM "$watch_pid" 2> /dev/null && wait "$watch_pid" 2> /dev/null || true
  [[ -n "$jvm" ]] && kill "$jvm" 2> /dev/null && wait "$jvm" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

java -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints -jar "$workloads" counted-loop \
  --shape dependent --rounds 1 --every 1200ms --duration 60s > "$work/jvm.out" 2>&1 &
jvm=$!
until "$bin" counters "$jvm" sun.rt.safepoints > /dev/null 2>&1; do
  kill -0 "$jvm" 2> /dev/null || { echo "the JVM ended: $(cat "$work/jvm.out")" >&2; exit 1; }
  sleep 0.1
done
"$bin" watch "$jvm" --out "$work/rec" --metrics 127.0.0.1:0 > /dev/null 2> "$work/watch.err" &
watch_pid=$!
addr=""
for _ in $(seq 100); do
  addr=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/watch.err" | head -n 1 || true)
  [[ -n "$addr" ]] && break
  sleep 0.1
done
[[ -n "$addr" ]] || { echo "watch did not say where it serves: $(cat "$work/watch.err")" >&2; exit 1; }
series=""
for _ in $(seq 300); do
  series=$(curl -fsS "$addr/metrics" | grep '^stallscope_stalls_total{.*# {report="' | head -n 1 || true)
  [[ -n "$series" ]] && break
  sleep 0.2
done
[[ -n "$series" ]] || { echo "no stall counted with its report's link in 60 s" >&2; exit 1; }
report=$(sed -E 's/.*# \{report="([^"]*)".*/\1/' <<< "$series")
echo "series: $series"
echo "followed: $addr$report"
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
  --user-data-dir="$work/profile" --window-size=1400,${HEIGHT:-2600} --screenshot="$out" "$addr$report" 2> /dev/null
ls -la "$out"
