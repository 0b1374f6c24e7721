#!/usr/bin/env bash
# The redis-py suite (tests/python) against a real `verso serve`: builds the release binary,
# makes a virtualenv under target/pyenv with redis and pytest, and runs the suite.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
PY=${PYTHON:-python3}
if ! command -v "$PY" >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq python3 >/dev/null
fi

cargo build --release -p verso --quiet

VENV=target/pyenv
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import redis, pytest' 2>/dev/null; then
  rm -rf "$VENV"
  if ! "$PY" -m venv "$VENV" 2>/dev/null; then
    # Debian splits venv (and ensurepip) out of python3.
    rm -rf "$VENV"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq python3-venv >/dev/null
    "$PY" -m venv "$VENV"
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check 'redis>=5,<8' 'pytest>=7'
fi

VERSO_BIN="$PWD/target/release/verso" "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/python "$@"
