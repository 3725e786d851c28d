#!/usr/bin/env bash
# make demo: the lab's quick counted-loop scenario (seed 004: a counted int loop holds every
# thread out of a safepoint), baseline beside mitigation, each run recorded by the doctor; then
# the same workload under `stallscope run`, whose diagnosis names the culprit thread, its code
# (the JVM's own stack samples) and the fix; both as HTML pages. Needs no root. About 30
# seconds after the build. Everything stays in target/demo.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/target/release/stallscope"
out="$root/target/demo"
rm -rf "$out"
mkdir -p "$out"
"$bin" lab run counted-loop --profile quick --out "$out/lab" --html
rec="$out/run"
jar="$root/java/workloads/target/stallscope-workloads.jar"
echo
echo "== The same loop under the doctor: stallscope run --out $rec -- java -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints -jar … counted-loop"
echo
"$bin" run --out "$rec" -- java -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints -jar "$jar" counted-loop --duration 3s --rounds 300 --trigger threaddump
"$bin" report "$rec" --html "$out/report.html"
echo
echo "== Open in a browser (self-contained, no network): $out/report.html (this recording) and $out/lab/lab.html (the lab run)"
