#!/usr/bin/env bash
# `npm run demo`: from a fresh checkout to the demo page in one command.
# Installs what is missing (scripts/setup.sh), builds the npm package
# (dist/, which the page loads from /pkg/) and the server, then runs
# `taskwire-server --demo` on http://127.0.0.1:8080 until Ctrl-C.
# Flags after `--` go to the server (`npm run demo -- --listen 127.0.0.1:9000`);
# so do the TASKWIRE_* environment variables (server/README.md).
#
# The first run on a fresh 2-core machine answered after about 3.5
# minutes (README, "The first start"); later runs take seconds. Each step
# says how long it took the first time, and prints its own time when it
# ends, so a newcomer can tell it is working and how long is left.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
step_started=$SECONDS
say() { printf '\ndemo: %s\n' "$*" >&2; }
step() {
  step_started=$SECONDS
  say "[$1/3] $2"
}
step_done() { printf 'demo: done in %d s (%d s since the start)\n' $((SECONDS - step_started)) $((SECONDS - started)) >&2; }

step 1 "setup: the wasm32 target and the npm dependencies, only what is missing (about 20 s the first time)"
bash scripts/setup.sh
step_done

step 2 "building the npm package into dist/: the wasm module and its JS (about 80 s the first time, a few seconds after)"
node scripts/build.mjs --no-setup
step_done

# The dev profile, without jemalloc: a demo has no use for the server
# profile's speed (opt-level 3, LTO) or jemalloc's smaller footprint under
# 10,000 held connections, and both cost minutes of compiling on a fresh
# machine (the server profile took 241 s). The e2e tests drive this same
# demo on a dev build.
step 3 "building taskwire-server (dev profile; about 2 minutes the first time, seconds after)"
cargo build --locked -p taskwire-server --no-default-features
step_done

server="${CARGO_TARGET_DIR:-target}/debug/taskwire-server"
if [ $# -eq 0 ] && [ -z "${TASKWIRE_LISTEN:-}" ]; then
  say "starting the demo after $((SECONDS - started)) s: open http://127.0.0.1:8080 (Ctrl-C stops it)"
else
  say "starting the demo after $((SECONDS - started)) s: open the address it listens on, printed below (Ctrl-C stops it)"
fi
exec "$server" --demo "$@"
