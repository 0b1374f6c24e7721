#!/usr/bin/env bash
# Makes (once) the virtualenv under target/pyenv with redis-py, pytest and PyYAML, installing
# Debian's python3 and python3-venv if they are missing, and prints its python's path.
# Used by scripts/python-tests.sh and bench/server-memory.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
PY=${PYTHON:-python3}
if ! command -v "$PY" >/dev/null 2>&1; then
  $SUDO apt-get update -qq >&2
  $SUDO apt-get install -y -qq python3 >/dev/null
fi
VENV=target/pyenv
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import redis, pytest, yaml' 2>/dev/null; then
  rm -rf "$VENV"
  if ! "$PY" -m venv "$VENV" >&2 2>/dev/null; then
    # Debian splits venv (and ensurepip) out of python3.
    rm -rf "$VENV"
    $SUDO apt-get update -qq >&2
    $SUDO apt-get install -y -qq python3-venv >/dev/null
    "$PY" -m venv "$VENV" >&2
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check 'redis>=5,<8' 'pytest>=7' 'pyyaml>=6' >&2
fi
echo "$PWD/$VENV/bin/python"
