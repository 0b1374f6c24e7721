#!/usr/bin/env bash
# The redis-py suite (tests/python) against a real `verso serve`: builds the release binary,
# makes the virtualenv under target/pyenv with redis and pytest (scripts/pyenv.sh), and runs
# the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p verso --quiet
python=$(scripts/pyenv.sh)
VERSO_BIN="$PWD/target/release/verso" "$python" -m pytest -q -p no:cacheprovider tests/python "$@"
