#!/usr/bin/env bash
# make demo: the lab's quick counted-loop scenario (seed 004: a counted int loop holds every
# thread out of a safepoint), baseline beside mitigation, each run recorded by the doctor; then
# the doctor's diagnosis of one baseline run, and both as HTML pages. Needs no root. About 20
# seconds after the build. Everything stays in target/demo.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/target/release/stallscope"
out="$root/target/demo"
rm -rf "$out"
mkdir -p "$out"
"$bin" lab run counted-loop --profile quick --out "$out/lab" --html
rec="$out/lab/counted-loop/no-poll-1"
echo
echo "== The doctor's diagnosis of the first baseline run (stallscope report $rec):"
echo
"$bin" report "$rec"
"$bin" report "$rec" --html "$out/report.html"
echo
echo "== Open in a browser (self-contained, no network): $out/report.html (this recording) and $out/lab/lab.html (the lab run)"
