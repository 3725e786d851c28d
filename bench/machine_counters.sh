#!/usr/bin/env bash
# The machine's counters a stall's first and last look read (`system_sample`): one reading of the
# TLB shootdowns from the BPF counters (offcpu's `Counters`, issue 54) against the `TLB` row of
# /proc/interrupts it stands in for, with /proc/vmstat (read at the same looks) as a second
# reference, all in the same run, in rounds that alternate the three. Needs root (BPF).
#
#   bench/machine_counters.sh             # 7 rounds of 2,000 reads each
#   bench/machine_counters.sh --quick     # 3 rounds of 500
set -euo pipefail
source "$(dirname "$0")/lib.sh"

rounds=${ROUNDS:-7}
reads=${READS:-2000}
if [[ "${1:-}" == "--quick" ]]; then rounds=${ROUNDS:-3}; reads=${READS:-500}; fi
cd "$root"
cargo build --release -q -p offcpu --example tlb_reads
"$root/target/release/examples/tlb_reads" "$rounds" "$reads"
