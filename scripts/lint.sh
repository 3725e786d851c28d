#!/usr/bin/env bash
# The gates every change passes before its tests: formatting, clippy, the docs, and a build with
# the oldest Rust the workspace declares (`rust-version` in Cargo.toml). `.ci/run` runs this
# before `make test`; run it yourself with `make lint`.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\nlint: %s\n' "$*" >&2; }

step "cargo fmt --check (rustfmt.toml)"
cargo fmt --all --check

step "cargo clippy --all-targets -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo doc, warnings denied"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --document-private-items --quiet

step "gofmt and go vet (deploy/kubecheck)"
unformatted=$(gofmt -l deploy/kubecheck)
[ -z "$unformatted" ] || { echo "lint: gofmt would change: $unformatted" >&2; exit 1; }
(cd deploy/kubecheck && go vet .)

msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
if [ -n "$msrv" ]; then
  step "cargo +$msrv check (the declared minimum Rust)"
  if ! rustup run "$msrv" rustc --version >/dev/null 2>&1; then
    # rustup's own server, not a package registry: a machine that cannot reach it says so
    # loudly here instead of failing every other gate with it.
    if ! rustup toolchain install "$msrv" --profile minimal >&2; then
      echo "lint: NOT CHECKED: Rust $msrv could not be installed with rustup (above)." >&2
      echo "lint: install it (rustup toolchain install $msrv --profile minimal) and rerun." >&2
      exit 0
    fi
  fi
  # Its own target directory: the stable toolchain's artifacts stay as they are.
  cargo "+$msrv" check --workspace --all-targets --locked --target-dir target/msrv
fi
step "all gates passed"
