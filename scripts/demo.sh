#!/usr/bin/env bash
# make demo: the lab's quick counted-loop scenario (seed 004: a counted int loop holds every
# thread out of a safepoint), baseline beside mitigation, each run recorded by the doctor; then
# the doctor's diagnosis of one baseline run. Needs no root. About 20 seconds after the build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/target/release/stallscope"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" lab run counted-loop --profile quick --out "$work/lab"
echo
echo "== The doctor's diagnosis of the first baseline run (stallscope report $work/lab/counted-loop/no-poll-1):"
echo
"$bin" report "$work/lab/counted-loop/no-poll-1"
