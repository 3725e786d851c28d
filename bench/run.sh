#!/usr/bin/env bash
# make bench: every benchmark, each printing its reference measured in the same run.
set -euo pipefail
cd "$(dirname "$0")"
for b in logs_throughput.sh logs_gcviewer.sh jfr_vs_jmc.sh report_html.sh culprit_frames.sh watch_overhead.sh watch_long.sh boost_overhead.sh who_overhead.sh machine_counters.sh bpf_overhead.sh neighbours.sh soak.sh; do
  echo "== $b"
  "./$b"
  echo
done
echo "== agent overhead and noise floor (java/agent/bench/overhead.sh)"
../java/agent/bench/overhead.sh
echo
echo "== doctor_overhead.sh"
./doctor_overhead.sh
