#!/usr/bin/env bash
# The Python worker library's checks: lint, format, types and its tests, which
# start the real server binary given as $1 (default: the debug build).
#
#   cargo build -p taskwire-server --bin taskwire-server
#   bash scripts/test-python.sh [path/to/taskwire-server [pytest args...]]
#
# The tests include the fault-injection suite (tests/test_faults_*.py, seed
# 001 §12): real worker processes killed and paused, on SQLite and on a
# throwaway PostgreSQL (scripts/pg.sh); without PostgreSQL binaries its
# PostgreSQL half is skipped, or fails with TASKWIRE_PG_REQUIRED=1. Only it:
#
#   bash scripts/test-python.sh <server> tests/test_faults_*.py
#
# The venv (~/.cache/taskwire/venv-worker) is made only when missing, and
# the package (editable, with its dev extras) installed only when its
# pyproject.toml changed, so a second run installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

server="${1:-${CARGO_TARGET_DIR:-target}/debug/taskwire-server}"
case "$server" in /*) ;; *) server="$root/$server" ;; esac
if [ ! -x "$server" ]; then
  echo "test-python: no server binary at $server; build it with" >&2
  echo "  cargo build -p taskwire-server --bin taskwire-server" >&2
  exit 1
fi

python="${PYTHON:-python3.11}"
if ! command -v "$python" >/dev/null; then
  echo "test-python: $python not found (the package needs Python 3.11 or later; set PYTHON)" >&2
  exit 1
fi

venv="$HOME/.cache/taskwire/venv-worker"
pkg="$root/python/taskwire-worker"
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
fi
stamp="$venv/.taskwire-worker-installed"
want="$pkg $(sha256sum "$pkg/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$pkg[dev]"
  echo "$want" > "$stamp"
fi

cd "$pkg"
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
"$venv/bin/mypy"
TASKWIRE_SERVER_BIN="$server" "$venv/bin/pytest" -q "${@:2}"
