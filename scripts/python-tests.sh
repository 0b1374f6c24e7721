#!/usr/bin/env bash
# The redis-py suite (tests/python) against a real `verso serve`: builds the release binary,
# makes the virtualenv under target/pyenv with redis and pytest (scripts/pyenv.sh), and runs
# the suite. tests/python/test_command_table.py compares COMMAND's answers with a real
# redis-server's, so Debian's redis-server is installed when it is missing (the tests start
# their own on a free port; a service the package may start is not used).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq redis-server >/dev/null
fi
cargo build --release -p verso --quiet
python=$(scripts/pyenv.sh)
VERSO_BIN="$PWD/target/release/verso" "$python" -m pytest -q -p no:cacheprovider tests/python "$@"
