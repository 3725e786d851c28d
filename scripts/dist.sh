#!/usr/bin/env bash
# make dist: a relocatable tree, dist/stallscope-<version>/{bin,lib,docs}, and its tarball.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The workspace's version (the crates inherit it).
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
out="$root/dist/stallscope-$version"
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib" "$out/docs"
cp "$root/target/release/stallscope" "$out/bin/"
# The stacks agent the recorder loads into a JVM it runs (found in ../lib beside the binary).
cp "$root/target/release/libstallscope_stacks.so" "$out/lib/"
for jar in "$root"/java/agent/target/stallscope-agent.jar "$root"/java/workloads/target/stallscope-workloads.jar; do
  [ -f "$jar" ] && cp "$jar" "$out/lib/"
done
cp -r "$root/docs/." "$out/docs/"
cp "$root/README.md" "$out/"
# The unit, the alerts and the dashboard (not kubecheck, the tests' checker of the manifests).
mkdir -p "$out/deploy" && find "$root/deploy" -maxdepth 1 -type f -exec cp {} "$out/deploy/" \;
tar -C "$root/dist" -czf "$root/dist/stallscope-$version-linux-$(uname -m).tar.gz" "stallscope-$version"
echo "dist/stallscope-$version-linux-$(uname -m).tar.gz"
