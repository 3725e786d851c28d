#!/usr/bin/env bash
# The HTML report at scale: a synthetic 24-hour recording with 100,000 safepoints and 300
# stalls (examples/synth_recording.rs, a stand-in: real shapes, made-up numbers).
#   1. generating the page, beside the text report of the same recording (the same loading and
#      diagnosis) and beside `cat` of its files (reading the input);
#   2. its size, beside the recording's;
#   3. its time to first render in headless Chromium (the page's own measure, from the start of
#      its script to everything drawn) and Chromium's wall time, beside Chromium on an empty page.
# Medians over RUNS runs (default 5), min and max in brackets.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
runs=${RUNS:-5}
chromium=${CHROMIUM:-/usr/bin/chromium}
[[ -x "$chromium" ]] || { echo "report_html.sh: $chromium not found; apt-get install chromium" >&2; exit 1; }

rec="$out/synth-24h"
if [[ ! -f "$rec/meta.json" ]]; then
  (cd "$root" && cargo run -q --release --example synth_recording -- "$rec" 24 100000 300)
fi
page="$out/synth-24h.html"
profile=$(mktemp -d "${TMPDIR:-/tmp}/stallscope-bench-chromium.XXXXXX")
trap 'rm -rf "$profile"' EXIT
browse() {
  rm -rf "$profile"/*
  "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$profile" --window-size=1400,1200 --dump-dom "file://$1" 2> /dev/null
}

echo "recording: $(du -sh "$rec" | cut -f1) in $(ls "$rec" | wc -l) files; $(grep -c 'Safepoint "' "$rec/safepoint.log") safepoints, $(grep -c stall-begin "$rec/events.jsonl") stalls, $(grep -vc '^#\|^"' "$rec/hiccups.hlog") hiccup intervals"
read -r h_med h_min h_max < <(measure "$runs" "$bin" report "$rec" --html "$page")
read -r t_med t_min t_max < <(measure "$runs" "$bin" report "$rec")
read -r c_med c_min c_max < <(measure "$runs" sh -c "cat '$rec'/* > /dev/null")
printf '  %-44s %7s s  (%s-%s)\n' "report --html" "$h_med" "$h_min" "$h_max"
printf '  %-44s %7s s  (%s-%s)   html / text: %sx\n' "reference: report (text), same diagnosis" "$t_med" "$t_min" "$t_max" "$(ratio "$h_med" "$t_med")"
printf '  %-44s %7s s  (%s-%s)   html / cat: %sx\n' "reference: cat of the recording's files" "$c_med" "$c_min" "$c_max" "$(ratio "$h_med" "$c_med")"
page_kb=$(( $(stat -c %s "$page") / 1024 )); rec_kb=$(du -sk "$rec" | cut -f1)
echo "  page size: ${page_kb} KB, $(ratio "$page_kb" "$rec_kb")x the recording (${rec_kb} KB)"

echo '<!DOCTYPE html><html><body><p>empty</p></body></html>' > "$out/empty.html"
render=(); wall=(); empty=()
for _ in $(seq "$runs"); do
  t0=$(date +%s%N); dom=$(browse "$page"); t1=$(date +%s%N)
  grep -q 'data-rendered="ok"' <<< "$dom" || { echo "report_html.sh: the page did not render: $(grep -o 'id="errors"[^<]*<' <<< "$dom")" >&2; exit 1; }
  render+=("$(grep -o 'data-render-ms="[^"]*"' <<< "$dom" | grep -o '[0-9.]*')")
  wall+=("$(( (t1 - t0) / 1000000 ))")
  t0=$(date +%s%N); browse "$out/empty.html" > /dev/null; t1=$(date +%s%N)
  empty+=("$(( (t1 - t0) / 1000000 ))")
done
stats() { printf '%s\n' "$@" | sort -g | awk '{ a[NR]=$1 } END { printf "%s (%s-%s)", a[int((NR+1)/2)], a[1], a[NR] }'; }
med() { printf '%s\n' "$@" | sort -g | awk '{ a[NR]=$1 } END { print a[int((NR+1)/2)] }'; }
echo "  time to first render (the page's script, parse to drawn): $(stats "${render[@]}") ms"
echo "  chromium wall time, load and render: $(stats "${wall[@]}") ms"
echo "  reference: chromium on an empty page: $(stats "${empty[@]}") ms; the report costs $(( $(med "${wall[@]}") - $(med "${empty[@]}") )) ms more"
