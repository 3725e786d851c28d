#!/usr/bin/env bash
# The observer as the neighbour (issue 54): under CPU contention, how often does stallscope's own
# thread take the CPU from a JVM thread that waits for one? Four CPU-bound hogs (`stallscope
# inject cpu-hog --threads 4`) beside a JVM that asks for a safepoint every 10 ms
# (`safepoint-storm --threads 2`), recorded by `stallscope run` with BPF (root). For each stall the
# doctor reports, its kernel lines name the thread the CPU went to as a JVM thread waited for it
# (`kernel[].longest.instead`): counted are the stalls where that is one of stallscope's own
# threads (the recorder's, or the agent's in the JVM: `stallscope*`), and, as the reference in the
# same run, those where it is one of the hogs (whose CPUs they are).
#
#   bench/neighbours.sh                  # 3 runs of 10 s
#   RUNS=5 SECS=15 bench/neighbours.sh
#   STALLSCOPE_REF_BIN=/path/to/an/older/stallscope bench/neighbours.sh   # both builds, alternating
set -euo pipefail
source "$(dirname "$0")/lib.sh"

runs=${RUNS:-3}
secs=${SECS:-10}
java=${JAVA:-java}
workloads="$root/java/workloads/target/stallscope-workloads.jar"
[[ $(id -u) -eq 0 ]] || { echo "neighbours.sh: needs root (BPF)" >&2; exit 1; }
for need in "$bin" "$workloads"; do
  [[ -f "$need" ]] || { echo "neighbours.sh: $need is missing; run make build first" >&2; exit 1; }
done
command -v jq > /dev/null || { echo "neighbours.sh: jq not found (scripts/setup.sh installs it)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/stallscope-neighbours.XXXXXX")
hog=""
cleanup() {
  [[ -n $hog ]] && { kill "$hog" 2> /dev/null || true; wait "$hog" 2> /dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

builds=("this:$bin")
[[ -n ${STALLSCOPE_REF_BIN:-} ]] && builds+=("ref:$STALLSCOPE_REF_BIN")

echo "$("$java" -version 2>&1 | head -n 1); $(nproc) CPUs; ${runs} runs of ${secs} s per build"
for r in $(seq "$runs"); do
  for b in "${builds[@]}"; do
    name=${b%%:*}; exe=${b#*:}
    rec="$work/rec-$name-$r"
    "$exe" inject cpu-hog --threads 4 --for "$((secs + 8))s" > /dev/null 2>&1 &
    hog=$!
    sleep 0.5
    timeout $((secs + 60)) "$exe" run --out "$rec" -- "$java" -jar "$workloads" safepoint-storm \
      --threads 2 --duration "${secs}s" --every 10ms > /dev/null 2>&1 || true
    kill "$hog" 2> /dev/null || true; wait "$hog" 2> /dev/null || true; hog=""
    "$bin" report --json "$rec" > "$work/$name-$r.json" 2> /dev/null || true
    jq -r '[.stalls | length,
            ([.[] | select([.kernel[]?.longest.instead // "" | test("^stallscope")] | any)] | length),
            ([.[] | select([.kernel[]?.longest.instead // "" | test("^cpu-hog")] | any)] | length)]
           | @tsv' "$work/$name-$r.json" >> "$work/$name"
    # Which of stallscope's threads, by name (a thread's number left out).
    jq -r '.stalls[] | [.kernel[]?.longest.instead // "" | select(test("^stallscope"))
           | sub(" ?\\(tid [0-9]+.*"; "")] | unique[]' "$work/$name-$r.json" >> "$work/$name.who"
    rm -rf "$rec"
  done
done

for b in "${builds[@]}"; do
  name=${b%%:*}
  shares=$(awk '{ if ($1 > 0) printf "%.1f\n", 100 * $2 / $1 }' "$work/$name")
  hogs=$(awk '{ if ($1 > 0) printf "%.1f\n", 100 * $3 / $1 }' "$work/$name")
  read -r s_med s_min s_max < <(echo "$shares" | median_spread)
  read -r h_med h_min h_max < <(echo "$hogs" | median_spread)
  total=$(awk '{ n += $1; o += $2 } END { printf "%d stalls, %d naming stallscope", n, o }' "$work/$name")
  printf '  %-6s stalls whose CPU went to a stallscope thread %6s%%  (%s-%s); to a hog %6s%%  (%s-%s); %s\n' \
    "$name" "$s_med" "$s_min" "$s_max" "$h_med" "$h_min" "$h_max" "$total"
  [[ -s "$work/$name.who" ]] && printf '         by thread: %s\n' \
    "$(sort "$work/$name.who" | uniq -c | sort -rn | awk '{ printf "%s %d, ", $2, $1 }' | sed 's/, $//')"
done
echo "  goal: <= 2% of stalls name a stallscope thread (issue 54; 43% before it)"
