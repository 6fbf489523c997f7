#!/usr/bin/env bash
# `npm run demo`: from a fresh checkout to the demo page in one command.
# Installs what is missing (scripts/setup.sh), builds the npm package
# (dist/, which the page loads from /pkg/) and the server, then runs
# `taskwire-server --demo` on http://127.0.0.1:8080 until Ctrl-C.
# Flags after `--` go to the server (`npm run demo -- --listen 127.0.0.1:9000`);
# so do the TASKWIRE_* environment variables (server/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\ndemo: %s\n' "$*" >&2; }

say "setup (installs only what is missing)"
bash scripts/setup.sh

say "building the npm package (dist/)"
node scripts/build.mjs --no-setup

say "building taskwire-server (--profile server: speed first; a few minutes the first time)"
cargo build --locked -p taskwire-server --profile server

server="${CARGO_TARGET_DIR:-target}/server/taskwire-server"
if [ $# -eq 0 ] && [ -z "${TASKWIRE_LISTEN:-}" ]; then
  say "starting the demo: open http://127.0.0.1:8080 (Ctrl-C stops it)"
else
  say "starting the demo: open the address it listens on, printed below (Ctrl-C stops it)"
fi
exec "$server" --demo "$@"
