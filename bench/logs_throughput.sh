#!/usr/bin/env bash
# stallscope logs on 1 GB of a JDK 17 `-Xlog:gc*,safepoint` log, beside `wc -l` on the same
# file in the same run, both pinned to one core; then peak memory on a 2 GB stream.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
reps=${REPS:-5}
cargo build -q --release -p hotspot-log --example gen_bench_log
log="$out/jdk17-gc-safepoint-1g.log"
[ -s "$log" ] || "$root/target/release/examples/gen_bench_log" jdk17 1024 "$log"
bytes=$(stat -c %s "$log")
cat "$log" > /dev/null   # into the page cache, for both
# Paired: each rep times `wc -l` and then stallscope back to back, so a slow moment of this
# shared machine weighs on both; the ratio is taken per pair, then its median.
wc_t=(); ss_t=(); ratios=()
for _ in $(seq "$reps"); do
  read -r w _ _ < <(measure 1 taskset -c 0 wc -l "$log")
  read -r s _ _ < <(measure 1 taskset -c 0 "$bin" logs --json "$log")
  wc_t+=("$w"); ss_t+=("$s"); ratios+=("$(ratio "$s" "$w")")
done
read -r wc_med wc_min wc_max < <(printf '%s\n' "${wc_t[@]}" | median_spread)
read -r ss_med ss_min ss_max < <(printf '%s\n' "${ss_t[@]}" | median_spread)
read -r r_med r_min r_max < <(printf '%s\n' "${ratios[@]}" | median_spread)
gbs=$(awk -v b="$bytes" -v t="$ss_med" 'BEGIN { printf "%.2f", b/1e9/t }')
echo "logs throughput: $(awk -v b="$bytes" 'BEGIN{printf "%.2f", b/1e9}') GB, JDK 17 gc*+safepoint shape, one core, $reps paired runs"
printf '  %-22s median %6.3f s  (min %.3f, max %.3f)\n' "wc -l" "$wc_med" "$wc_min" "$wc_max"
printf '  %-22s median %6.3f s  (min %.3f, max %.3f)  = %s GB/s\n' "stallscope logs --json" "$ss_med" "$ss_min" "$ss_max" "$gbs"
echo "  ratio stallscope / wc -l, per pair: median ${r_med}x (min $r_min, max $r_max)   (goals: >= 1 GB/s; within 2x of wc -l)"
rss=$( { cat "$log" "$log" | /usr/bin/time -f '%M' "$bin" logs --json - > /dev/null; } 2>&1 | tail -1)
echo "  peak RSS reading a 2 GB stream from stdin: $(( rss / 1024 )) MB   (goal: < 100 MB)"
