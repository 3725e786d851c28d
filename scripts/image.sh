#!/usr/bin/env bash
# make image: an OCI image archive of the `make dist` tree, for the DaemonSet
# (docs/kubernetes/stallscope-daemonset.yaml): `ctr -n k8s.io images import`, `docker load`
# (Docker 25 and later) and `podman load` all read it.
#
#   scripts/image.sh [OUT.tar]      # default dist/stallscope-<version>-image.tar
#   IMAGE_NAME=registry.example.com/stallscope:0.1.0 scripts/image.sh
#
# What is in it: /usr/local/bin/stallscope (debug info stripped), /usr/local/lib/ with the stacks
# agent and the Java agent (the binary finds them in ../lib), the shared libraries the two
# native files load, copied from this machine with each library's Debian copyright file and the
# project's licence under /usr/share/doc, an /etc/passwd naming root, and the empty directories
# the DaemonSet mounts over. No shell, no package manager: nothing to run but stallscope.
#
# Reproducible: every file's time is the last commit's (SOURCE_DATE_EPOCH overrides it), owners
# 0, entries sorted, the layer gzipped without a name or time: the same dist tree gives the same
# digest (printed last, as `sha256:…`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The workspace's version (the crates inherit it).
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
dist="$root/dist/stallscope-$version"
out=${1:-$root/dist/stallscope-$version-image.tar}
name=${IMAGE_NAME:-stallscope:$version}
for need in "$dist/bin/stallscope" "$dist/lib/libstallscope_stacks.so"; do
  [[ -f "$need" ]] || { echo "image: $need is missing; run make dist first" >&2; exit 1; }
done
for tool in tar gzip sha256sum ldd dpkg-query strip; do
  command -v "$tool" > /dev/null || { echo "image: $tool is needed (Debian: apt-get install binutils dpkg tar gzip)" >&2; exit 1; }
done
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2> /dev/null || echo 0)}
revision=$(git -C "$root" rev-parse HEAD 2> /dev/null || echo unknown)
case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) arch=$(uname -m) ;;
esac

w=$(mktemp -d "${TMPDIR:-/tmp}/stallscope-image.XXXXXX")
trap 'rm -rf "$w"' EXIT
r="$w/rootfs"
mkdir -p "$r"/usr/local/bin "$r"/usr/local/lib "$r"/usr/lib "$r"/usr/lib64 "$r"/usr/share/doc/stallscope \
  "$r"/etc "$r"/proc "$r"/sys/kernel/tracing "$r"/dev "$r"/tmp "$r"/var/lib/stallscope "$w/blobs/sha256"
ln -s usr/lib "$r/lib"
ln -s usr/lib64 "$r/lib64"
chmod 1777 "$r/tmp"
strip --strip-debug -o "$r/usr/local/bin/stallscope" "$dist/bin/stallscope"
cp "$dist/lib/libstallscope_stacks.so" "$r/usr/local/lib/"
for jar in "$dist"/lib/*.jar; do
  [[ "$(basename "$jar")" == stallscope-workloads.jar ]] && continue
  [[ -f "$jar" ]] && cp "$jar" "$r/usr/local/lib/"
done
echo 'root:x:0:0:root:/:/usr/local/bin/stallscope' > "$r/etc/passwd"
echo 'root:x:0:' > "$r/etc/group"

# The shared libraries, at the paths the dynamic loader looks in, with their copyright files.
libs=$(ldd "$dist/bin/stallscope" "$dist/lib/libstallscope_stacks.so" |
  awk '/=>/ { print $3 } /^\t\/.*ld-linux/ { print $1 }' | sort -u)
for lib in $libs; do
  [[ -f "$lib" ]] || { echo "image: $lib (from ldd) is not a file" >&2; exit 1; }
  # /lib/x86_64-linux-gnu/libc.so.6 → /usr/lib/x86_64-linux-gnu/libc.so.6 (the image's /lib is
  # a link to usr/lib, as on a merged-/usr Debian).
  dest="$r/usr${lib#/usr}"
  mkdir -p "$(dirname "$dest")"
  cp -L "$lib" "$dest"
  pkg=$(dpkg-query -S "$(realpath "$lib")" 2> /dev/null | head -1 | cut -d: -f1) ||
    pkg=$(dpkg-query -S "$lib" 2> /dev/null | head -1 | cut -d: -f1) || true
  [[ -n "$pkg" && -f "/usr/share/doc/$pkg/copyright" ]] ||
    { echo "image: no Debian package owns $lib (its licence is needed in the image)" >&2; exit 1; }
  mkdir -p "$r/usr/share/doc/$pkg"
  cp "/usr/share/doc/$pkg/copyright" "$r/usr/share/doc/$pkg/copyright"
done
cat > "$r/usr/share/doc/stallscope/copyright" << EOF
stallscope $version ($revision)
License: Apache-2.0 (the workspace's Cargo.toml). The Rust crates it is built from are listed
with their licences by \`cargo tree\` in its source; the libraries beside it are Debian's, each
with its copyright file under /usr/share/doc.
EOF

tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$r" -cf "$w/layer.tar" .
blob() {
  local d
  d=$(sha256sum "$1" | cut -d' ' -f1)
  mv "$1" "$w/blobs/sha256/$d"
  echo "$d"
}
size() { stat -c %s "$w/blobs/sha256/$1"; }
diff_id=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
gzip -n -9 "$w/layer.tar"
layer=$(blob "$w/layer.tar.gz")
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
labels="\"org.opencontainers.image.title\":\"stallscope\",\"org.opencontainers.image.version\":\"$version\",\"org.opencontainers.image.revision\":\"$revision\",\"org.opencontainers.image.licenses\":\"Apache-2.0\""
printf '{"created":"%s","architecture":"%s","os":"linux","config":{"Entrypoint":["/usr/local/bin/stallscope"],"Cmd":["watch","--all"],"Env":["PATH=/usr/local/bin"],"WorkingDir":"/","Labels":{%s}},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"%s","created_by":"stallscope scripts/image.sh"}]}' \
  "$created" "$arch" "$labels" "$diff_id" "$created" > "$w/config.json"
config=$(blob "$w/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}],"annotations":{%s}}' \
  "$config" "$(size "$config")" "$layer" "$(size "$layer")" "$labels" > "$w/manifest.json"
manifest=$(blob "$w/manifest.json")
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest" "$(size "$manifest")" "$arch" "$name" "${name##*:}" > "$w/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' > "$w/oci-layout"
# Docker's loader reads its own manifest.json beside the OCI layout.
printf '[{"Config":"blobs/sha256/%s","RepoTags":["%s"],"Layers":["blobs/sha256/%s"]}]' \
  "$config" "$name" "$layer" > "$w/manifest.json"
mkdir -p "$(dirname "$out")"
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C "$w" \
  -cf "$out" oci-layout index.json manifest.json blobs
echo "image: $out ($(du -h "$out" | cut -f1), $name, $arch)"
echo "sha256:$manifest"
