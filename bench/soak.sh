#!/usr/bin/env bash
# `stallscope watch --all` soaked (issue 58): a population of JVMs that changes all the time on
# this machine, faults on the way, and a row of figures every minute. Does anything watch holds
# grow with time, is every stall a JVM's own safepoint log shows an event, and does watch leave
# anything behind when it is killed?
#
# The population (every JVM logs its safepoints with -Xlog, the ground truth):
#   loop     safepoints waiting on a counted loop (20 rounds every 3 s), the whole run
#   gc       full GCs of a 64 MB heap every 20 s (Parallel), the whole run
#   threads  2,000 threads that wake every second, asked for a thread dump by jcmd every minute
#   churn    an idle JVM started every 20 s, living 5 s to 3 min (at most 6 at once); every
#            second one in a cgroup of its own (v2), removed when it exits
#   mapped   every 90 s a JVM that reads a mapped file through a slow FUSE mount (50 ms a
#            read, the page cache evicted first) while asking for safepoints
#   stops    every 2 min a churn JVM stopped 200 ms (SIGSTOP, SIGCONT)
#   hogs     every 3 min two CPU-bound threads for 10 s
#   pods     every 4 min a Kubernetes pod (a containerd of the bench's own with its CRI plugin,
#            driven by crictl, as tests/kubernetes.rs runs it) whose JVM (Temurin 25) waits on a
#            counted loop for thread dumps, living 2-3 min; PODS=0 leaves them out
# Faults, at fractions of the run:
#   35%  the FUSE mount stops answering (reads take 60 s) for a minute while a mapped JVM reads
#        through it: no other JVM's guarding may wait for it
#   50%  watch is killed with SIGKILL, what it left is listed (BPF programs, tracefs instances,
#        cgroups, processes), and it is started again on the same --out
#   70%  the disk under --out (a tmpfs of the bench's own) is filled for a minute
# Every minute: watch's CPU, RSS, descriptors, threads, its BPF maps' entries, the metric
# series it serves, the disk under --out, events written, JVMs alive. At the end: the first and
# last tenth of the run side by side (goal: within 10%), the disk's peak against --retain, the
# safepoints of the JVMs' own logs above twice the threshold that no event covered (goal 0),
# panics (goal 0), and what SIGTERM left (goal: nothing).
#
#   bench/soak.sh                  # 8 minutes (make bench)
#   MINUTES=60 bench/soak.sh       # an hour; MINUTES=1440 a day
#   KEEP=1 bench/soak.sh           # keep the work directory (recordings, logs, rows)
# Needs root (BPF, cgroups, a tmpfs, FUSE), java, jcmd and python3; for pods also containerd,
# runc, ctr, gcc and crictl (scripts/setup.sh builds it into target/tools) and Temurin 25.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

minutes=${MINUTES:-8}
java=${JAVA:-java}
jcmd="$(dirname "$(readlink -f "$(command -v "$java")")")/jcmd"
workloads="$root/java/workloads/target/stallscope-workloads.jar"
[[ $(id -u) -eq 0 ]] || { echo "soak.sh: needs root (BPF, cgroups, a tmpfs mount, FUSE)" >&2; exit 1; }
for need in "$bin" "$workloads" "$jcmd"; do
  [[ -x "$need" || -f "$need" ]] || { echo "soak.sh: $need is missing; run make build first" >&2; exit 1; }
done
command -v python3 > /dev/null || { echo "soak.sh: python3 is missing" >&2; exit 1; }
(( minutes >= 4 )) || { echo "soak.sh: MINUTES must be at least 4" >&2; exit 1; }
pods=${PODS:-1}
java25=${JAVA25:-/usr/lib/jvm/temurin-25-jdk-amd64/bin/java}
crictl_bin=$root/target/tools/crictl
[[ -x "$crictl_bin" ]] || crictl_bin=$(command -v crictl || true)
if [[ "$pods" != 0 ]]; then
  for need in containerd runc ctr gcc; do
    command -v "$need" > /dev/null || { echo "soak.sh: $need is missing for the pods (scripts/setup.sh; PODS=0 leaves them out)" >&2; exit 1; }
  done
  [[ -x "$crictl_bin" ]] || { echo "soak.sh: crictl is missing (scripts/setup.sh builds it; PODS=0 leaves pods out)" >&2; exit 1; }
  [[ -x "$java25" && "$java25" == /usr/* ]] || { echo "soak.sh: the pods' JDK ($java25) must be under /usr (bind-mounted); set JAVA25" >&2; exit 1; }
fi

secs=$((minutes * 60))
retain_mb=48
threshold_ns=5000000
work=$(mktemp -d "${TMPDIR:-/tmp}/stallscope-soak.XXXXXX")
out_dir="$work/out"
cg2=$(findmnt -n -t cgroup2 -o TARGET | head -n 1)
[[ -n "$cg2" ]] || { echo "soak.sh: cgroup v2 is not mounted (findmnt -t cgroup2 found none)" >&2; exit 1; }
cg=$cg2/stallscope-soak-$$
port=$((20000 + RANDOM % 20000))
watch_pid=""
slowfs_pid=""
pids=()       # every JVM and helper started, killed at the end
mkdir -p "$out_dir" "$work/back" "$work/logs"
# The pods' runtime: its directory, its daemon, and the kubepods levels it made in each cgroup
# hierarchy (removed after, where they did not exist before).
cri="$work/cri"
ctrd_pid=""
pod_uid_prefix="5c1d2e3f-50a6-4c7d-8e9f-$(printf '%06x' $$)"
pod_parent=kubepods/besteffort
made_parents=()
hierarchies() {
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then echo /sys/fs/cgroup; else
    find /sys/fs/cgroup -mindepth 1 -maxdepth 1 -type d; fi
}
crictl() {
  timeout 60 "$crictl_bin" --runtime-endpoint "unix://$cri/containerd.sock" \
    --image-endpoint "unix://$cri/containerd.sock" --timeout 30s "$@"
}

cleanup() {
  set +e
  [[ -n "$watch_pid" ]] && kill -TERM "$watch_pid" 2> /dev/null && wait "$watch_pid" 2> /dev/null
  for p in "${pids[@]}"; do kill -CONT "$p" 2> /dev/null; kill -KILL "$p" 2> /dev/null; done
  # (Not a bare `wait`: slowfs is a child too, and ends only below.)
  wait "${pids[@]}" 2> /dev/null
  # slowfs unmounts at SIGTERM once its delayed reads are answered; one held 60 s is not waited for.
  if [[ -n "$slowfs_pid" ]]; then
    kill -TERM "$slowfs_pid" 2> /dev/null
    for _ in $(seq 50); do kill -0 "$slowfs_pid" 2> /dev/null || break; sleep 0.1; done
    kill -KILL "$slowfs_pid" 2> /dev/null && wait "$slowfs_pid" 2> /dev/null
    mountpoint -q "$work/slow" && fusermount3 -u -z "$work/slow"
  fi
  if [[ -n "$ctrd_pid" ]]; then
    crictl rmp --force --all > /dev/null 2>&1
    # Its shims, by the socket their command lines name; then the daemon.
    for p in $(pgrep -f -- "$cri/containerd.sock"); do kill -KILL "$p" 2> /dev/null; done
    kill -KILL "$ctrd_pid" 2> /dev/null; wait "$ctrd_pid" 2> /dev/null
    # Each pod's cgroups, deepest first, after what is left in them.
    for h in $(hierarchies); do
      for d in $(find "$h/$pod_parent" -mindepth 1 -maxdepth 1 -type d -name "pod$pod_uid_prefix*" 2> /dev/null); do
        for g in $(find "$d" -depth -type d); do
          for p in $(cat "$g/cgroup.procs" 2> /dev/null); do kill -KILL "$p" 2> /dev/null; done
          for _ in $(seq 50); do [[ -d "$g" ]] || break; rmdir "$g" 2> /dev/null && break; sleep 0.1; done
        done
      done
    done
    for ((i = ${#made_parents[@]} - 1; i >= 0; i--)); do rmdir "${made_parents[i]}" 2> /dev/null; done
    # What the runtime mounted under its directory (a sandbox's shm, a rootfs), deepest first.
    awk -v d="$cri" 'index($5, d) == 1 { print length($5), $5 }' /proc/self/mountinfo | sort -rn |
      cut -d' ' -f2- | while read -r m; do umount -l "$m"; done
    # containerd 1.6 puts its shims' sockets in the host's /run/containerd/s: those no process
    # holds any more go (a host's own containerd keeps its own).
    for f in /run/containerd/s/*; do
      [[ -e "$f" ]] && ! grep -qF "$f" /proc/net/unix && rm -f "$f"
    done
    rmdir /run/containerd/s /run/containerd 2> /dev/null
  fi
  # A killed process leaves its cgroup a moment after it is reaped.
  for d in "$cg"/j* "$cg"; do
    for _ in $(seq 50); do [[ -d "$d" ]] || break; rmdir "$d" 2> /dev/null && break; sleep 0.1; done
  done
  # The recordings live on the bench's own tmpfs: KEEP=1 copies them out before it goes, so that
  # a miss can be looked into afterwards.
  [[ -n "${KEEP:-}" ]] && mountpoint -q "$out_dir" && cp -a "$out_dir" "$work/recordings"
  mountpoint -q "$out_dir" && umount "$out_dir"
  [[ -n "${KEEP:-}" ]] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mono_ns() { python3 -c 'import time; print(time.monotonic_ns())'; }
log_opt() { echo "-Xlog:safepoint:file=$work/logs/sp-$1-%p.log:utctime,uptimenanos,timenanos"; }

# The disk under --out: a tmpfs of the bench's own, so that filling it fills nothing else.
mount -t tmpfs -o mode=0755,size=$((retain_mb * 3))m stallscope-soak "$out_dir"
mkdir "$cg"

# The slow disk: a 64 MB file behind a FUSE mount.
dd if=/dev/urandom of="$work/back/data" bs=1M count=64 status=none
"$bin" inject slowfs "$work/back" "$work/slow" --read-delay 50ms --max-delay 90s > "$work/slowfs.out" 2>&1 &
slowfs_pid=$!
until [[ -f "$work/slow/.stallscope-slowfs" ]]; do sleep 0.1; kill -0 "$slowfs_pid" || { cat "$work/slowfs.out"; exit 1; }; done

# The pods' runtime: containerd with its CRI plugin, its state in the bench's directory, the
# cgroupfs driver's layout, and the one image (built here: no registry is reachable).
if [[ "$pods" != 0 ]]; then
  mkdir -p "$cri"
  for h in $(hierarchies); do
    p=$h
    for part in kubepods besteffort; do p=$p/$part; [[ -d "$p" ]] || made_parents+=("$p"); done
  done
  cat > "$cri/config.toml" << TOML
version = 2
root = "$cri/root"
state = "$cri/state"
[grpc]
  address = "$cri/containerd.sock"
[ttrpc]
  address = "$cri/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "stallscope.test/pause:1"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$cri/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cri/cni/bin"
    conf_dir = "$cri/cni/conf"
TOML
  containerd --config "$cri/config.toml" > /dev/null 2> "$cri/containerd.log" &
  ctrd_pid=$!
  for _ in $(seq 150); do crictl version > /dev/null 2>&1 && break; sleep 0.2; done
  crictl version > /dev/null 2>&1 || { echo "soak.sh: containerd did not answer; see $cri/containerd.log" >&2; exit 1; }
  bash "$root/crates/stallscope/tests/kubernetes/pause-image.sh" "$cri/pause.tar" stallscope.test/pause:1
  ctr --address "$cri/containerd.sock" -n k8s.io images import "$cri/pause.tar" > /dev/null
fi

watch_args=(watch --all --out "$out_dir" --retain "${retain_mb}M" --metrics "127.0.0.1:$port"
  --events "$work/events.jsonl" --keep-exited 1m)
down_since=$(mono_ns)
start_watch() {
  "$bin" "${watch_args[@]}" > /dev/null 2>> "$work/watch.err" &
  watch_pid=$!
  until curl -sf "http://127.0.0.1:$port/metrics" > /dev/null; do
    sleep 0.2
    kill -0 "$watch_pid" 2> /dev/null || { echo "soak.sh: watch ended; see $work/watch.err" >&2; tail "$work/watch.err" >&2; exit 1; }
  done
  echo "$down_since $(mono_ns) $1" >> "$work/down.txt"
}

# What stallscope has on the machine besides its own process: BPF programs and maps, tracefs
# instances, cgroups, processes (the guardian).
leftovers() {
  local progs maps inst cgs procs
  progs=$(bpftool prog show -j 2> /dev/null | jq '[.[] | select(.name | test("^on_"))] | length')
  inst=$(ls /sys/kernel/tracing/instances 2> /dev/null | grep -c stallscope || true)
  cgs=$(find /sys/fs/cgroup -maxdepth 3 -name '*stallscope*' ! -path "$cg*" 2> /dev/null | wc -l)
  procs=$(pgrep -f "^$bin (watch|guard)" | grep -vx "${watch_pid:-0}" | wc -l || true)
  maps=$(bpftool map show -j 2> /dev/null | jq '[.[] | select(.name | IN("targets", "off", "stacks", "cputime", "held", "spdog"))] | length')
  echo "BPF programs $progs, maps $maps, tracefs instances $inst, cgroups $cgs, processes $procs"
}

start_watch "before it was ready"
echo "$("$bin" --version), $("$java" -version 2>&1 | head -n 1), $(nproc) CPUs; ${minutes} minutes, --retain ${retain_mb}M"

# The long-lived JVMs.
"$java" -Xmx64m -XX:+UseParallelGC -XX:-UseCountedLoopSafepoints "$(log_opt loop)" -jar "$workloads" \
  counted-loop --duration "$((secs + 60))s" --rounds 20 --every 3s > "$work/loop.out" 2>&1 &
pids+=($!)
"$java" -Xmx160m -XX:+UseParallelGC "$(log_opt gc)" -jar "$workloads" \
  heap-gc --live 64 --gcs $((secs / 20 + 3)) --every 20s > "$work/gc.out" 2>&1 &
pids+=($!)
"$java" -Xmx64m -Xss256k -XX:+UseSerialGC "$(log_opt threads)" -jar "$workloads" \
  idle --threads 2000 --every 1s --duration "$((secs + 60))s" > "$work/threads.out" 2>&1 &
threads_jvm=$!
pids+=($threads_jvm)

churn=()      # live churn JVMs
churn_n=0
start_churn() {
  local life=$((5 + RANDOM % 175)) name=churn$churn_n
  if (( churn_n % 2 == 1 )); then
    mkdir -p "$cg/j$churn_n"
    # A cgroup of its own: the shell puts itself in, then becomes the JVM.
    sh -c "echo \$\$ > $cg/j$churn_n/cgroup.procs && exec $java -Xmx16m -Xss256k -XX:+UseSerialGC -XX:TieredStopAtLevel=1 $(log_opt "$name") -jar $workloads idle --threads 4 --duration ${life}s" > /dev/null 2>&1 &
  else
    "$java" -Xmx16m -Xss256k -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "$(log_opt "$name")" -jar "$workloads" \
      idle --threads 4 --duration "${life}s" > /dev/null 2>&1 &
  fi
  churn+=($!); pids+=($!)
  churn_n=$((churn_n + 1))
}
reap_churn() {
  local alive=() p
  for p in "${churn[@]}"; do kill -0 "$p" 2> /dev/null && alive+=("$p"); done
  churn=("${alive[@]}")
  local d
  # (cgroup.procs reads as size 0 even when it lists processes: read it.)
  for d in "$cg"/j*; do
    [[ -d "$d" ]] && ! grep -q . "$d/cgroup.procs" 2> /dev/null && { rmdir "$d" 2> /dev/null || true; }
  done
  return 0
}
start_mapped() {
  # The mount's own page cache too: evicting the backing file alone left the pages the last
  # mapped JVM read cached in the FUSE inode, and the hung JVM's reads never reached the mount.
  "$bin" inject evict "$work/back/data" "$work/slow/data" > /dev/null 2>&1 || true
  "$java" -Xmx32m "$(log_opt mapped)" -jar "$workloads" mapped-read --file "$work/slow/data" \
    --stride 1m --reads "$1" --safepoint threaddump --every 50ms > /dev/null 2>&1 &
  pids+=($!)
}

pod_n=0
pod_sandbox=""; pod_until=0
# A pod whose JVM waits on a counted loop for thread dumps, living $1 s. Its safepoint log is
# written under its pid in the pod (the pod's pause process is 1), then named by its pid on the
# host once that is known.
start_pod() {
  local life=$1 uid dir=$cri/pods/$pod_n name=soak-$pod_n n=$pod_n pid="" id
  uid=$pod_uid_prefix$(printf '%06x' "$pod_n")
  pod_n=$((pod_n + 1))
  mkdir -p "$dir"
  cat > "$dir/pod.json" << JSON
{"metadata": {"name": "$name", "namespace": "soak", "uid": "$uid", "attempt": 0},
 "log_directory": "$dir/logs",
 "linux": {"cgroup_parent": "/$pod_parent/pod$uid",
           "security_context": {"namespace_options": {"network": 2, "pid": 0, "ipc": 0}}}}
JSON
  cat > "$dir/ctr.json" << JSON
{"metadata": {"name": "loop"}, "image": {"image": "stallscope.test/pause:1"},
 "command": ["$java25", "-Xmx64m", "-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints",
   "-Xlog:safepoint:file=/logs/sp-pod$n-%p.log:utctime,uptimenanos,timenanos",
   "-jar", "/work/$(basename "$workloads")", "counted-loop", "--duration", "${life}s",
   "--rounds", "20", "--every", "3s", "--trigger", "threaddump"],
 "log_path": "loop.log",
 "mounts": [{"container_path": "/usr", "host_path": "/usr", "readonly": true},
            {"container_path": "/work", "host_path": "$(dirname "$workloads")", "readonly": true},
            {"container_path": "/logs", "host_path": "$work/logs"}],
 "linux": {}}
JSON
  pod_sandbox=$(crictl runp "$dir/pod.json" 2>> "$cri/crictl.err") || { pod_sandbox=""; return 0; }
  pod_until=$(( $(date +%s) - begin + life + 10 ))
  id=$(crictl create "$pod_sandbox" "$dir/ctr.json" "$dir/pod.json" 2>> "$cri/crictl.err") || return 0
  crictl start "$id" > /dev/null 2>> "$cri/crictl.err" || return 0
  local log=""
  for _ in $(seq 100); do
    pid=$(crictl inspect -o go-template --template '{{.info.pid}}' "$id" 2> /dev/null || true)
    log=$(compgen -G "$work/logs/sp-pod$n-*.log" | head -n 1 || true)
    [[ -n "$pid" && "$pid" != 0 && -n "$log" ]] && break
    sleep 0.1
  done
  if [[ -n "$pid" && "$pid" != 0 && -n "$log" ]]; then
    mv "$log" "$work/logs/sp-pod$n-$pid.log" 2> /dev/null || true
  fi
  return 0
}
stop_pod() {
  [[ -n "$pod_sandbox" ]] && crictl rmp --force "$pod_sandbox" > /dev/null 2>> "$cri/crictl.err"
  pod_sandbox=""
  return 0
}

# A row every minute.
rows="$work/rows"
: > "$rows"
cpu0=$(process_cpu_ns "$watch_pid"); t0=$(date +%s%N)
row() {
  local m=$1 cpu1 t1 rss fds thr maps series disk ev live
  cpu1=$(process_cpu_ns "$watch_pid"); t1=$(date +%s%N)
  rss=$(awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' /proc/"$watch_pid"/status)
  thr=$(awk '/^Threads/ { print $2 }' /proc/"$watch_pid"/status)
  fds=$(ls /proc/"$watch_pid"/fd | wc -l)
  # Entries in the hash maps of watch's programs (arrays and rings have a fixed size), each map
  # apart in bpf_rows: targets (a guarded JVM whose index in the targets array, its pid's low 16
  # bits, another holds: nearly always none), off (a thread's wait whose index in the waits
  # array another thread holds), stacks (a thread's last wait's kernel stacks), cputime (each
  # process's CPU time while a stall is under way, emptied after). The last three are LRU maps:
  # bounded by their size whatever happens; a leak would show as a floor that rises.
  # (Named, not by owner: this bpftool does not say which process holds a map.)
  local name id k per=() caps=()
  maps=0
  for name in targets off stacks cputime; do
    k=0
    for id in $(bpftool map show -j 2> /dev/null | jq -r --arg n "$name" '.[] | select(.name == $n) | .id'); do
      k=$((k + $(bpftool map dump id "$id" -j 2> /dev/null | jq length)))
    done
    per+=("$k"); maps=$((maps + k))
    [[ -s "$work/bpf_caps" ]] || caps+=("$(bpftool map show -j 2> /dev/null |
      jq -r --arg n "$name" '[.[] | select(.name == $n) | .max_entries] | first // 0')")
  done
  [[ -s "$work/bpf_caps" || ${#caps[@]} -ne 4 || ${caps[0]} == 0 ]] || echo "${caps[*]}" > "$work/bpf_caps"
  series=$(curl -sf "http://127.0.0.1:$port/metrics" | grep -c '^stallscope_' || true)
  disk=$(du -sm --exclude=.fill "$out_dir" | awk '{ print $1 }')
  ev=$(wc -l < "$work/events.jsonl" 2> /dev/null || echo 0)
  live=$(pgrep -c -f "stallscope-workloads.jar" || true)
  printf '%s %s %s %s %s %s %s %s %s %s\n' "$m" "$(pct $((cpu1 - cpu0)) $((t1 - t0)))" "$rss" "$fds" "$thr" \
    "$maps" "$series" "$disk" "$ev" "$live" >> "$rows"
  echo "$m ${per[*]} $live" >> "$work/bpf_rows"
  printf '  %4s %8s%% %8s %5s %6s %8s %7s %7s %7s %5s\n' "$m" "$(pct $((cpu1 - cpu0)) $((t1 - t0)))" "$rss" "$fds" \
    "$thr" "$maps" "$series" "$disk" "$ev" "$live"
  cpu0=$cpu1; t0=$t1
}
printf '  %4s %9s %8s %5s %6s %8s %7s %7s %7s %5s\n' min "CPU" "RSS MiB" fds threads "BPF ent" series "disk MB" events JVMs

begin=$(date +%s)
minute=0
# The kill falls 30 s into the hang: the mapped JVM's stall is under way.
hang_at=$((secs * 35 / 100)); kill_at=$((hang_at + 30)); fill_at=$((secs * 70 / 100))
hang_done=""; kill_done=""; fill_done=""; hung=""
next_churn=0; next_mapped=30; next_stop=60; next_hog=90; next_dump=45; next_pod=120
while :; do
  now=$(( $(date +%s) - begin ))
  (( now >= secs )) && break
  reap_churn
  if (( now >= next_churn )); then
    (( ${#churn[@]} < 6 )) && start_churn
    next_churn=$((now + 20))
  fi
  if (( now >= next_mapped )); then start_mapped 8; next_mapped=$((now + 90)); fi
  if (( now >= next_dump )); then "$jcmd" "$threads_jvm" Thread.print > /dev/null 2>&1 & next_dump=$((now + 60)); fi
  if (( now >= next_stop )) && (( ${#churn[@]} > 0 )); then
    "$bin" inject freeze --for 200ms "${churn[0]}" > /dev/null 2>&1 &
    next_stop=$((now + 120))
  fi
  if [[ "$pods" != 0 ]]; then
    if [[ -n "$pod_sandbox" ]] && (( now >= pod_until )); then stop_pod; fi
    if [[ -z "$pod_sandbox" ]] && (( now >= next_pod )); then
      start_pod $((120 + RANDOM % 60)); next_pod=$((now + 240))
    fi
  fi
  if (( now >= next_hog )); then "$bin" inject cpu-hog --threads 2 --for 10s > /dev/null 2>&1 & next_hog=$((now + 180)); fi
  if [[ -z "$hang_done" ]] && (( now >= hang_at )); then
    hang_done=1
    echo "  -- $((now / 60)) min: the FUSE mount stops answering (reads 60 s) for a minute, a mapped JVM reading through it"
    "$bin" inject slowfs-set "$work/slow" --read-delay 60s > /dev/null
    start_mapped 2
    hung=${pids[-1]}
    ( sleep 60; "$bin" inject slowfs-set "$work/slow" --read-delay 50ms > /dev/null ) &
    pids+=($!)
  fi
  if [[ -z "$kill_done" ]] && (( now >= kill_at )); then
    kill_done=1
    down_since=$(mono_ns)
    kill -KILL "$watch_pid"; wait "$watch_pid" 2> /dev/null || true
    sleep 2
    echo "  -- $((now / 60)) min: watch killed with SIGKILL, 30 s into the hung JVM's stall; left: $(leftovers)"
    unread=0
    for d in "$out_dir"/*/; do
      [[ -f "$d/meta.json" ]] || continue
      "$bin" report "$d" > /dev/null 2>> "$work/report.err" || unread=$((unread + 1))
    done
    echo "  -- its recordings: $(ls -d "$out_dir"/*/ 2> /dev/null | wc -l), $unread that report cannot read; the hung JVM's (pid $hung), as report reads it:"
    for d in "$out_dir/$hung"-*/; do
      [[ -d "$d" ]] || { echo "       none: watch had not found it"; continue; }
      "$bin" report "$d" > "$work/hung-report.txt" 2>&1 || true
      { grep -E "^STALL|^  (cause|culprit) |^  stalls " "$work/hung-report.txt" || echo "no stall in it"; } |
        tail -n 3 | sed 's/^ */       /'
    done
    start_watch "killed and started again"
    # The next row counts the new watch from here: its start-up, then the rest of the minute.
    cpu0=$(process_cpu_ns "$watch_pid"); t0=$(date +%s%N)
  fi
  if [[ -z "$fill_done" ]] && (( now >= fill_at )); then
    fill_done=1
    echo "  -- $((now / 60)) min: the disk under --out filled for a minute"
    dd if=/dev/zero of="$out_dir/.fill" bs=1M status=none 2> /dev/null || true
    ( sleep 60; rm -f "$out_dir/.fill" ) &
    pids+=($!)
  fi
  if (( now >= (minute + 1) * 60 )); then minute=$((minute + 1)); row "$minute"; fi
  sleep 1
done
kill -0 "$watch_pid" 2> /dev/null || { echo "soak.sh: watch ended early; see $work/watch.err" >&2; tail "$work/watch.err" >&2; exit 1; }
[[ "$pods" != 0 ]] && stop_pod
rm -f "$out_dir/.fill"
# From SIGTERM on, watch closes its recordings (a second, with many JVMs): safepoints that begin
# then are not watched for, and count as while it was down.
down_since=$(mono_ns); echo "$down_since $((down_since + 3600000000000)) after SIGTERM" >> "$work/down.txt"
kill -TERM "$watch_pid"; wait "$watch_pid" || echo "  watch exited $? at SIGTERM"
watch_pid=""
sleep 1
echo "  after SIGTERM: $(leftovers)"

# The summary: the first tenth against the last, the disk, the ground truth, panics.
n=$(wc -l < "$rows"); tenth=$(( (n + 9) / 10 ))
echo "  first tenth (min 1-$tenth) against the last (min $((n - tenth + 1))-$n), medians:"
# (Series grow with the JVMs alive and those exited within --keep-exited: per JVM alive too.)
for col in "2 CPU %" "3 RSS MiB" "4 fds" "5 threads" "6 BPF entries" "7 series" "11 series/JVM"; do
  c=${col%% *}; name=${col#* }
  a=$(head -n "$tenth" "$rows" | awk -v c="$c" '{ $11 = $10 > 0 ? $7 / $10 : 0; print $c }' | median_spread | cut -d' ' -f1)
  b=$(tail -n "$tenth" "$rows" | awk -v c="$c" '{ $11 = $10 > 0 ? $7 / $10 : 0; print $c }' | median_spread | cut -d' ' -f1)
  printf '    %-12s %10s %10s   last / first %s   goal <= 1.10\n' "$name" "$a" "$b" "$(ratio "$b" "$a")"
done
# The BPF maps one by one: a median that rises and falls with the stalls and threads of the
# moment says little as a ratio of small numbers; what matters is that none approaches its size
# and that none keeps a floor that rises (the least of each tenth, first against last).
if [[ -s "$work/bpf_rows" ]]; then
  read -r -a caps < "$work/bpf_caps" 2> /dev/null || caps=(? ? ? ?)
  echo "    BPF map entries, each map (first tenth's median, last tenth's, each tenth's least, the peak, the map's size):"
  i=0
  for name in targets off stacks cputime; do
    c=$((i + 2))
    a=$(head -n "$tenth" "$work/bpf_rows" | awk -v c="$c" '{ print $c }' | median_spread | cut -d' ' -f1)
    b=$(tail -n "$tenth" "$work/bpf_rows" | awk -v c="$c" '{ print $c }' | median_spread | cut -d' ' -f1)
    peak=$(awk -v c="$c" '{ if ($c > m) m = $c } END { print m + 0 }' "$work/bpf_rows")
    floors=$(awk -v c="$c" -v t="$tenth" '{ k = int((NR - 1) / t); if (!(k in m) || $c < m[k]) m[k] = $c }
      END { for (i = 0; i in m; i++) printf "%s%s", (i ? " " : ""), m[i] }' "$work/bpf_rows")
    printf '      %-8s %6s %6s   least by tenth: %s   peak %5s of %s\n' "$name" "$a" "$b" "$floors" "$peak" "${caps[$i]:-?}"
    i=$((i + 1))
  done
fi
echo "    disk under --out at most $(awk '{ if ($8 > m) m = $8 } END { print m + 0 }' "$rows") MB (the filled minute's row aside: see it), --retain ${retain_mb} MB"
echo "    events $(wc -l < "$work/events.jsonl"), panics in watch's stderr: $(grep -c 'panicked' "$work/watch.err" || true)"
if [[ "$pods" != 0 ]]; then
  echo "    pods started $pod_n; events naming a pod of theirs: $(grep -c '"namespace":"soak"' "$work/events.jsonl" || true); crictl's complaints: $(grep -vc 'level=warning' "$cri/crictl.err" 2> /dev/null || true)"
fi
echo "  the JVMs' own safepoint logs, each safepoint of at least $((2 * threshold_ns / 1000000)) ms against watch's events:"
python3 "$(dirname "$0")/soak_truth.py" "$bin" "$work/events.jsonl" "$work/down.txt" $((2 * threshold_ns)) "$work"/logs/sp-*.log | sed 's/^/    /'
