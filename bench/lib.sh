# Shared helpers for the benchmarks: repeated timing with median and spread.
# Sourced by bench/*.sh. Times are wall-clock seconds from date +%s%N.

# measure N CMD...: runs CMD N times (output discarded), prints "median min max" in seconds.
measure() {
  local n=$1; shift
  local times=()
  for _ in $(seq "$n"); do
    local t0 t1
    t0=$(date +%s%N)
    "$@" > /dev/null 2>&1
    t1=$(date +%s%N)
    times+=("$(( t1 - t0 ))")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR]=$1 } END { printf "%.3f %.3f %.3f\n", a[int((NR+1)/2)]/1e9, a[1]/1e9, a[NR]/1e9 }'
}

# ratio A B: A/B to two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a/b; else print "n/a" }'; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/bench/out"
mkdir -p "$out"
bin="$root/target/release/stallscope"
