#!/usr/bin/env bash
# pause-image.sh OUT.tar NAME: builds the one image tests/kubernetes.rs runs (no registry is
# reachable here): an OCI image archive, named NAME for `ctr images import`, holding a static
# `pause` (the pod sandbox's process, and the entrypoint of the JVM's container, whose command
# replaces it) and the empty directories a container's mounts need. The JDK and the workloads
# come from the host, bind-mounted read-only at /usr and /work.
set -euo pipefail
out=$1 name=$2
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
cat >"$w/pause.c" <<'EOF'
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void quit(int s) { (void)s; _exit(0); }
static void reap(int s) { (void)s; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGINT, quit);
  signal(SIGTERM, quit);
  signal(SIGCHLD, reap);
  for (;;) pause();
}
EOF
mkdir -p "$w/rootfs"/{proc,sys,dev,etc,tmp,usr,work} "$w/blobs/sha256"
gcc -static -Os -o "$w/rootfs/pause" "$w/pause.c"
ln -s usr/lib "$w/rootfs/lib"
ln -s usr/lib64 "$w/rootfs/lib64"
ln -s usr/bin "$w/rootfs/bin"
chmod 1777 "$w/rootfs/tmp"
echo 'root:x:0:0:root:/:/pause' >"$w/rootfs/etc/passwd"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$w/rootfs" -cf "$w/layer.tar" .
blob() {
  local d
  d=$(sha256sum "$1" | cut -d' ' -f1)
  mv "$1" "$w/blobs/sha256/$d"
  echo "$d"
}
size() { stat -c %s "$w/blobs/sha256/$1"; }
layer=$(blob "$w/layer.tar")
printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
  "$layer" >"$w/config.json"
config=$(blob "$w/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "$config" "$(size "$config")" "$layer" "$(size "$layer")" >"$w/manifest.json"
manifest=$(blob "$w/manifest.json")
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest" "$(size "$manifest")" "$name" "${name##*:}" >"$w/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$w/oci-layout"
tar -C "$w" -cf "$out" oci-layout index.json blobs
