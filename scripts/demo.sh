#!/usr/bin/env bash
# `npm run demo`: from a fresh checkout to the demo page in one command.
# Installs what is missing (scripts/setup.sh), builds the npm package
# (dist/, which the page loads from /pkg/) and the server, then runs
# `taskwire-server --demo` on http://127.0.0.1:8080 until Ctrl-C.
# Flags after `--` go to the server (`npm run demo -- --listen 127.0.0.1:9000`);
# so do the TASKWIRE_* environment variables (server/README.md).
#
# A fresh 2-core machine answers after about 2.5 minutes (docs/benchmarks.md, "The
# first start"); later runs take seconds. Each step says how long it took
# the first time and prints its own time when it ends, and cargo shows
# how many crates are left, so a newcomer can tell it is working and how
# long is left.
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

step 1 "setup: the wasm32 target and the npm dependencies, only what is missing (about 10 s the first time)"
bash scripts/setup.sh
step_done

target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target"
package_log="$target/demo-package-build.log"

# The two builds run side by side: the package's (the wasm module, in the
# release profile, and tools/bindgen, in the `tools` profile) and the
# server's (dev profile) each hold a lock of their own, and together they
# keep both cores busy where either alone leaves one idle (a link, LTO,
# the server crate's own compile).
step 2 "building the npm package into dist/ (in the background; log: $package_log) and taskwire-server (about 2.5 minutes the first time, seconds after)"
node scripts/build.mjs --no-setup >"$package_log" 2>&1 &
package_build=$!
trap 'kill "$package_build" 2>/dev/null || true' EXIT
# The dev profile, only the server binary, without jemalloc: a demo has
# no use for the server profile's speed (opt-level 3, LTO), the load
# tools, or jemalloc's smaller footprint under 10,000 held connections,
# and each costs compile time on a fresh machine (the server profile with
# everything took 241 s). The e2e tests drive this same demo on a dev
# build.
cargo build --locked -p taskwire-server --bin taskwire-server --no-default-features
step_done

step 3 "the npm package (usually finished by now)"
if ! wait "$package_build"; then
  trap - EXIT
  cat "$package_log" >&2
  say "building the npm package failed (above; also in $package_log)"
  exit 1
fi
trap - EXIT
# The page's size, as the build printed it.
grep -A 12 '^client build' "$package_log" | grep -E '^client build|^  page ' >&2 || true
step_done

server="$target/debug/taskwire-server"
if [ $# -eq 0 ] && [ -z "${TASKWIRE_LISTEN:-}" ]; then
  say "starting the demo after $((SECONDS - started)) s: open http://127.0.0.1:8080 (Ctrl-C stops it)"
else
  say "starting the demo after $((SECONDS - started)) s: open the address it listens on, printed below (Ctrl-C stops it)"
fi
exec "$server" --demo "$@"
