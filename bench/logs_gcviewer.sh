#!/usr/bin/env bash
# GCViewer 1.36 (Maven Central) beside stallscope on a ~200 MB JDK 8 GC log with
# PrintGCApplicationStoppedTime: time both, and check the total stopped time agrees to the ms.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
reps=${REPS:-3}
jar="$out/gcviewer-1.36.jar"
[ -s "$jar" ] || mvn -q -B dependency:copy -Dartifact=com.github.chewiebug:gcviewer:1.36 -DoutputDirectory="$out" > /dev/null
cargo build -q --release -p hotspot-log --example gen_bench_log
log="$out/jdk8-gcdetails-stoppedtime-200m.log"
[ -s "$log" ] || "$root/target/release/examples/gen_bench_log" jdk8 200 "$log"
cat "$log" > /dev/null
gcv() { java -Xmx6g -jar "$jar" "$log" "$out/gcviewer-plain.txt" -t PLAIN; }
# stallscope runs in a tenth of a second, where this shared machine's hiccups weigh more: more
# runs, spread before, between and after GCViewer's, so both see the same stretch of time.
sreps=$(( reps * 3 ))
ss() { "$bin" logs --json "$log"; }
ss1() { "$bin" logs --threads 1 --json "$log"; }
s_t=(); s1_t=(); g_t=()
for _ in $(seq "$reps"); do
  for _ in 1 2 3; do
    read -r t _ _ < <(measure 1 ss); s_t+=("$t")
    read -r t _ _ < <(measure 1 ss1); s1_t+=("$t")
  done
  read -r t _ _ < <(measure 1 gcv); g_t+=("$t")
done
read -r g_med g_min g_max < <(printf '%s\n' "${g_t[@]}" | median_spread)
read -r s_med s_min s_max < <(printf '%s\n' "${s_t[@]}" | median_spread)
read -r s1_med s1_min s1_max < <(printf '%s\n' "${s1_t[@]}" | median_spread)
gcv > /dev/null 2>&1
# GCViewer's PLAIN export lists every pause. For a "Total time for which application threads
# were stopped" that follows a GC, it reports the time *minus* that GC's pause (so as not to
# count it twice); its stopped time is therefore the GC pauses plus those remainders.
g_total=$(awk '
  /Total time for which application threads were stopped/ { match($0, /stopped: [0-9.E-]+ secs/); v = substr($0, RSTART + 9, RLENGTH - 14); s += v; n++; next }
  /secs\]/ { m = $0; last = ""; while (match(m, /[0-9.E-]+ secs\]/)) { last = substr(m, RSTART, RLENGTH - 6); m = substr(m, RSTART + RLENGTH) } if (last != "") s += last }
  END { printf "%.6f", s }' "$out/gcviewer-plain.txt")
g_count=$(grep -c 'Total time for which application threads were stopped' "$out/gcviewer-plain.txt" || true)
s_json=$("$bin" logs --json "$log")
s_total=$(echo "$s_json" | python3 -c 'import json,sys; print("%.6f" % (json.load(sys.stdin)["total_stopped_ns"]/1e9))')
s_count=$(echo "$s_json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["safepoints"])')
diff_ms=$(awk -v a="$g_total" -v b="$s_total" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.3f", d * 1000 }')
agree=$(awk -v d="$diff_ms" 'BEGIN { print (d < 1.0) ? "AGREE" : "DISAGREE" }')
cores=$(nproc)
echo "GCViewer 1.36 vs stallscope: $(( $(stat -c %s "$log") / 1000000 )) MB JDK 8 GC log, GCViewer $reps runs, stallscope $sreps runs each way"
printf '  %-34s median %7.3f s  (min %.3f, max %.3f)\n' "GCViewer (PLAIN export)" "$g_med" "$g_min" "$g_max"
printf '  %-34s median %7.3f s  (min %.3f, max %.3f)\n' "stallscope logs --json ($cores cores)" "$s_med" "$s_min" "$s_max"
printf '  %-34s median %7.3f s  (min %.3f, max %.3f)\n' "stallscope logs --json --threads 1" "$s1_med" "$s1_min" "$s1_max"
echo "  speed-up: $(ratio "$g_med" "$s_med")x on $cores cores, $(ratio "$g_med" "$s1_med")x on one thread   (goal: >= 100x)"
echo "  total stopped: GCViewer ${g_total} s in ${g_count} pauses, stallscope ${s_total} s in ${s_count}: differ by ${diff_ms} ms -> ${agree} to the millisecond"
