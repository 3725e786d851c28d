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
read -r g_med g_min g_max < <(measure "$reps" gcv)
read -r s_med s_min s_max < <(measure "$reps" "$bin" logs --json "$log")
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
echo "GCViewer 1.36 vs stallscope: $(( $(stat -c %s "$log") / 1000000 )) MB JDK 8 GC log, $reps runs each"
printf '  %-22s median %7.3f s  (min %.3f, max %.3f)\n' "GCViewer (PLAIN export)" "$g_med" "$g_min" "$g_max"
printf '  %-22s median %7.3f s  (min %.3f, max %.3f)\n' "stallscope logs --json" "$s_med" "$s_min" "$s_max"
echo "  speed-up: $(ratio "$g_med" "$s_med")x"
echo "  total stopped: GCViewer ${g_total} s in ${g_count} pauses, stallscope ${s_total} s in ${s_count}: differ by ${diff_ms} ms -> ${agree} to the millisecond"
