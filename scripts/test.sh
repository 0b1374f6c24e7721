#!/usr/bin/env bash
# The whole test suite, as the README promises: run from a fresh clone with nothing else set up.
# Installs what it needs (a Rust toolchain if cargo is missing; Debian's python3-venv and
# redis-tools for the client suites); everything else comes from crates.io and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n== %s\n' "$*"; }

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    say "installing a Rust toolchain (Debian's cargo/rustc)"
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq cargo rustc >/dev/null
  fi
fi
cargo --version
# The workspace needs Rust >= 1.92 (Cargo.toml's rust-version; the benchmark crate's comparison indexes need it). Debian's packaged cargo can be
# older; say so plainly instead of failing deep inside a dependency's build.
rust_minor=$(rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')
if [ "${rust_minor:-0}" -lt 92 ]; then
  echo "error: Rust $(rustc --version) is too old: Verso needs 1.92 or newer (install with rustup)" >&2
  exit 1
fi

if cargo fmt --version >/dev/null 2>&1; then
  say "cargo fmt --check"
  cargo fmt --all -- --check
else
  echo "warning: rustfmt not installed; skipping the format check" >&2
fi

if cargo clippy --version >/dev/null 2>&1; then
  say "cargo clippy -D warnings"
  cargo clippy --workspace --all-targets --quiet -- -D warnings
else
  echo "warning: clippy not installed; skipping lints" >&2
fi

say "cargo test (unit, property, concurrency, history-checked workloads)"
cargo test --workspace

say "loom models of the concurrent primitives (--cfg loom)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p verso-engine --lib --release --quiet loom

say "loom models of the index's version-word protocol (--cfg loom)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p verso-index --lib --release --quiet loom

# Randomized schedules of whole-tree operations; a failure prints the schedule and seed to
# replay. SHUTTLE_ITERATIONS=N runs N executions per scheduler and test for a longer soak.
say "shuttle schedules of Masstree splits, unlinks and layers (--cfg shuttle)"
RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR=target/shuttle \
  cargo test -p verso-index --lib --release --quiet shuttle

# The server through real clients, as separate processes (installing what they need):
# redis-py (a virtualenv under target/pyenv), then Debian's redis-cli and redis-benchmark.
say "redis-py suite against verso serve (scripts/python-tests.sh)"
./scripts/python-tests.sh

say "redis-cli smoke run and a short redis-benchmark (scripts/redis-tools-smoke.sh)"
./scripts/redis-tools-smoke.sh

say "all tests passed"
