#!/usr/bin/env python3
"""bench/soak.sh's ground truth: did every stall each JVM's own safepoint log shows become an
event of `watch`?

  soak_truth.py STALLSCOPE EVENTS.jsonl DOWN.txt MIN_NS LOG...

Each LOG is one JVM's `-Xlog:safepoint` file (decorated with `timenanos`: CLOCK_MONOTONIC, the
clock this script reads too); its pid is in its name (`sp-ROLE-PID.log`). STALLSCOPE's `logs
--csv` parses it. A safepoint whose total is at least MIN_NS (twice watch's threshold, so that
one just at the threshold is not counted either way) is found when an event of the same pid
overlaps it (50 ms of slack each side: the event's time is wall clock to the millisecond, moved
onto the monotonic clock here). DOWN.txt holds "BEGIN_NS END_NS WHY" lines, monotonic: spans when
watch was not running (before it was ready, killed, after it ended); a safepoint in one is
counted apart, not as missed. So are two kinds of miss, each counted and listed on its own:
those that began in a JVM's first STARTING s of uptime (watch finds new JVMs once a second), and
those that began within STARTING s after watch was ready again (it finds and opens every JVM
then), and those that ended within STARTING s before watch was killed (their diagnosis under
way; `report` reads them from the recording).

A safepoint found is also checked for being **split**: overlapped, without slack, by events of two
or more of its pid's recordings by at least SPLIT_NS each (a stall cut by a roll of its
recording and seen again by the next). Each is listed and counted.

Prints each miss, then a summary line `truth N found F missed M …`, and a JSON line of the same
for the bench. Exit status 0 unless the inputs cannot be read.
"""
import csv
import datetime
import io
import json
import os
import re
import subprocess
import sys
import time

SLACK = 50_000_000
STARTING = 2_000_000_000
SPLIT_NS = 2_000_000


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    bin_, events_path, down_path, min_ns = sys.argv[1:5]
    logs = sys.argv[5:]
    min_ns = int(min_ns)
    offset = time.time_ns() - time.monotonic_ns()  # wall - monotonic, now

    events = {}
    with open(events_path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                e = json.loads(line)
                t = datetime.datetime.fromisoformat(e["time"]).timestamp()
                start = int(t * 1e9) - offset
                events.setdefault(e["jvm"]["pid"], []).append(
                    (start, start + int(e["duration_ns"]), e.get("recording", "")))
            except (ValueError, KeyError, TypeError) as err:
                sys.exit(f"{events_path}:{n}: not a watch event ({err})")

    down = []
    if os.path.exists(down_path):
        with open(down_path, encoding="utf-8") as f:
            for line in f:
                parts = line.split(None, 2)
                if len(parts) >= 2:
                    down.append((int(parts[0]), int(parts[1]), parts[2].strip() if len(parts) > 2 else ""))

    truth = found = missed = in_down = young = restarting = in_flight = split = 0
    misses = []
    splits = []
    for log in logs:
        m = re.search(r"-(\d+)\.log$", log)
        if not m or os.path.getsize(log) == 0:
            continue
        pid = int(m.group(1))
        out = subprocess.run([bin_, "logs", "--csv", "--no-rotation", log], capture_output=True, text=True)
        if out.returncode not in (0, 5):
            print(f"{log}: stallscope logs failed ({out.returncode}): {out.stderr.strip()}", file=sys.stderr)
            continue
        for row in csv.DictReader(io.StringIO(out.stdout)):
            try:
                total = int(row["total_ns"] or 0)
                end = int(row["end_timenanos"])
            except (ValueError, KeyError):
                continue
            if total < min_ns:
                continue
            begin = end - total
            if any(b <= end and begin <= e for b, e, _ in down):
                in_down += 1
                continue
            truth += 1
            if any(b - SLACK <= end and begin <= e + SLACK for b, e, _ in events.get(pid, [])):
                found += 1
                parts = len({r for b, e, r in events.get(pid, []) if min(e, end) - max(b, begin) >= SPLIT_NS})
                if parts >= 2:
                    split += 1
                    splits.append(f"  split across {parts} recordings: pid {pid} ({os.path.basename(log)} line "
                                  f"{row['line']}): {row['operation']} {total / 1e6:.1f} ms, ending at "
                                  f"monotonic {end / 1e9:.3f} s")
                continue
            uptime = int(row["start_uptime_ns"] or STARTING)
            if uptime < STARTING:
                young += 1
                kind = "in the JVM's first 2 s"
            elif any(e <= begin < e + STARTING for _, e, _ in down):
                restarting += 1
                kind = "in watch's first 2 s"
            elif any(b - STARTING <= end < b and "killed" in why for b, _, why in down):
                in_flight += 1
                kind = "ended in the 2 s before watch was killed"
            else:
                missed += 1
                kind = "missed"
            misses.append(f"  {kind}: pid {pid} ({os.path.basename(log)} line {row['line']}): "
                          f"{row['operation']} {total / 1e6:.1f} ms at uptime {uptime / 1e9:.3f} s, "
                          f"ending at monotonic {end / 1e9:.3f} s")
    for lines in (misses, splits):
        for m in lines[:20]:
            print(m)
        if len(lines) > 20:
            print(f"  … and {len(lines) - 20} more")
    print(f"truth {truth} found {found} missed {missed}; apart: in a JVM's first 2 s {young}, "
          f"in watch's first 2 s {restarting}, ended in the 2 s before watch was killed {in_flight}, "
          f"while watch was down {in_down}; found split across recordings {split}")
    print(json.dumps({"truth": truth, "found": found, "missed": missed, "jvm_first_2s": young,
                      "watch_first_2s": restarting, "before_kill": in_flight,
                      "while_down": in_down, "split": split}))


if __name__ == "__main__":
    main()
