#!/usr/bin/env bash
# `stallscope report app.jfr` beside JDK Mission Control's automated analysis (JfrRulesReport from
# Maven Central's flightrecorder.rules.jdk 9.1.0, headless) on every flight recording of
# tests/fixtures/jfr: what each names for the scenario's stall, and the time each takes on the
# same file (median of REPS runs, min and max), with JMC's time over stallscope's as the ratio.
# A 1 GB recording (the fixtures' chunks concatenated) measures reading speed and memory.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
reps=${REPS:-3}
jmc="$out/jmc"
[ -s "$jmc/flightrecorder.rules.jdk-9.1.0.jar" ] ||
  mvn -q -B -f "$root/bench/jmc/pom.xml" dependency:copy-dependencies -DoutputDirectory="$jmc" > /dev/null
fx="$root/tests/fixtures/jfr"
work="$out/jfr"
mkdir -p "$work"
jmc_run() { java -cp "$jmc/*" org.openjdk.jmc.flightrecorder.rules.report.JfrRulesReport -format json -min ok "$1"; }
ss_run() { "$bin" report --json "$1"; }

# What stallscope names for the longest stall: cause, confidence, culprit, instigator.
ss_answer() {
  python3 - "$1" << 'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
s = [x for x in r["stalls"] if x["duration_ns"] >= 20_000_000]
if not s:
    print("no stall over 20 ms"); sys.exit()
s = max(s, key=lambda x: x["duration_ns"])
f = s["findings"][0]
who = f.get("instigator")
c = f["culprits"][0]["name"] if f["culprits"] else "-"
print(f'{f["cause"]} ({f["confidence"]}, {s["duration_ns"] // 1_000_000} ms), culprit {c}, by {who["kind"] + " " + who["name"] if who else "-"}')
EOF
}

# What JMC names: the rules about halts, VM operations, GC pauses and the CPUs (whatever their
# severity), and any other rule at warning.
jmc_answer() {
  python3 - "$1" << 'EOF'
import json, re, sys
text = open(sys.argv[1]).read()
# JfrRulesReport's JSON writes a score as it prints it ("score": ,  or "score": 500 ×10⁻¹²,) and
# leaves a trailing comma where it evaluated no rule: the scores are not used here.
text = re.sub(r'"score":[^\n]*,\n', '"score": null,\n', text)
text = re.sub(r',(\s*[}\]])', r'\1', text)
try:
    rules = json.loads(text)[0].get("rules", [])
except ValueError as e:
    print(f"(its output is not JSON: {e})"); sys.exit()
if not rules:
    print("no rule evaluated"); sys.exit()
wanted = ("VMOperations", "ApplicationHalts", "GcPauseRatio", "LongGcPause", "GcStall", "CompareCpu", "BiasedLockingRevocation", "SafepointDuration")
keep = [f'{r["id"]} {r["severity"]}: {r["summary"][:110]}' for r in rules
        if r["id"] in wanted or r["severity"] == "Warning"]
print(" / ".join(keep) if keep else "no halt, VM operation, GC or CPU rule, and no warning")
EOF
}

printf '%-40s %-10s %-10s %-7s %s\n' "recording" "stallscope" "JMC" "JMC/ss" "answers"
ratios=()
for gz in "$fx"/*.jfr.gz; do
  name=$(basename "$gz" .jfr.gz)
  f="$work/$name.jfr"
  [ -s "$f" ] || gunzip -c "$gz" > "$f"
  read -r s_med s_min s_max < <(measure "$reps" ss_run "$f")
  read -r j_med j_min j_max < <(measure "$reps" jmc_run "$f")
  ss_run "$f" > "$work/$name.ss.json"
  jmc_run "$f" > "$work/$name.jmc.json" 2> /dev/null || true
  r=$(ratio "$j_med" "$s_med")
  ratios+=("$r")
  printf '%-40s %-10s %-10s %-7s\n' "$name" "${s_med}s" "${j_med}s" "${r}x"
  printf '    stallscope: %s\n' "$(ss_answer "$work/$name.ss.json")"
  printf '    JMC:        %s\n' "$(jmc_answer "$work/$name.jmc.json" 2>&1 | head -c 600)"
  printf '    spread: stallscope %s..%s s, JMC %s..%s s\n' "$s_min" "$s_max" "$j_min" "$j_max"
done
read -r r_med r_min r_max < <(printf '%s\n' "${ratios[@]}" | median_spread)
echo "JMC's time over stallscope's on the same file: median ${r_med}x (min ${r_min}x, max ${r_max}x)"

# A 1 GB recording: the fixtures' chunks over and over (a JFR file is its chunks end to end).
big="$work/big.jfr"
if [ ! -s "$big" ] || [ "$(stat -c %s "$big")" -lt 1000000000 ]; then
  : > "$big"
  while [ "$(stat -c %s "$big")" -lt 1000000000 ]; do
    for gz in "$fx"/*.jfr.gz; do gunzip -c "$gz" >> "$big"; done
  done
fi
size=$(stat -c %s "$big")
read -r w_med w_min w_max < <(measure "$reps" wc -l "$big")
read -r b_med b_min b_max < <(measure "$reps" ss_run "$big")
rss=$( { /usr/bin/time -f '%M' "$bin" report --json "$big" > /dev/null; } 2>&1 | tail -1)
echo "a $((size / 1000000)) MB recording: stallscope report ${b_med}s (min ${b_min}, max ${b_max}), wc -l ${w_med}s: $(ratio "$b_med" "$w_med")x wc's time; $(awk -v s="$size" -v t="$b_med" 'BEGIN { printf "%.0f", s / 1e6 / t }') MB/s; peak RSS of the report ${rss} KB (the reader processes are children: see docs/formats/jfr.md)"
