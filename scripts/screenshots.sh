#!/usr/bin/env bash
# Re-makes the README's screenshots of the HTML report, in headless Chromium, from a stored real
# recording (tests/fixtures/recordings) and a stored real quick lab run (tests/fixtures/lab).
# Usage: scripts/screenshots.sh   (after make build; needs /usr/bin/chromium)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/target/release/stallscope"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shot() { # page png height
  rm -rf "$work/profile"
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$work/profile" \
    --window-size=1400,"$3" --screenshot="$2" "file://$1" 2> /dev/null
}
"$bin" report "$root/tests/fixtures/recordings/jdk17-mapped-read-mmap-slowfs-300ms" --html "$work/recording.html"
shot "$work/recording.html" "$root/docs/report-recording.png" 2450
mkdir -p "$work/lab" && cp "$root/tests/fixtures/lab/quick/lab.json" "$work/lab/"
"$bin" report "$work/lab" --html "$work/lab.html"
shot "$work/lab.html" "$root/docs/report-lab.png" 1500
ls -la "$root"/docs/report-*.png
