#!/usr/bin/env bash
# Installs the fuzzing run's Python packages (tests/openapi/requirements.txt)
# into a virtualenv outside the repository, and does nothing when they are
# already there. Prints the venv's path. Needs Python >= 3.10 with venv and
# pip (Debian: apt-get install python3-venv), and PyPI.
#
#   bash tests/openapi/setup.sh        # -> ~/.cache/taskwire/openapi-venv
#
# TASKWIRE_OPENAPI_VENV chooses another directory; PYTHON another interpreter.
# The first install downloads about 25 MB (94 MB installed), about a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv="${TASKWIRE_OPENAPI_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/taskwire/openapi-venv}"
python="${PYTHON:-python3}"
requirements=tests/openapi/requirements.txt
stamp="$venv/.requirements"

say() { printf 'openapi setup: %s\n' "$*" >&2; }

if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$stamp"; then
  echo "$venv"
  exit 0
fi
command -v "$python" >/dev/null || { say "$python not found: install Python >= 3.10 (or set PYTHON)"; exit 1; }
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { say "$python is older than 3.10"; exit 1; }
say "installing schemathesis and its pinned dependencies into $venv (about a minute, once)"
mkdir -p "$(dirname "$venv")"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"
echo "$venv"
