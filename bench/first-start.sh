#!/usr/bin/env bash
# The first start of a fresh machine, as near as one machine can replay it:
# a new clone of this checkout's HEAD, an empty cargo home (no registry
# cache, no installed tools), an empty npm cache and a copy of the Rust
# toolchain without the wasm32 target. Times `npm run demo` until the
# demo page answers, then, with --test, `npm test` after it.
#
#   bash bench/first-start.sh [--test] [SCRATCH_DIR]
#
# What it cannot make fresh: packages installed with apt (Chromium,
# Firefox, PostgreSQL; `npm test` installs them when missing) and the
# OpenAPI test's Python venv. Needs about 4 GB of disk in SCRATCH_DIR
# (default /tmp/taskwire-first-start) for the toolchain copy and builds.
set -euo pipefail

run_tests=false
if [ "${1:-}" = "--test" ]; then run_tests=true; shift; fi
scratch="${1:-/tmp/taskwire-first-start}"
repo_root="$(cd "$(dirname "$0")/.." && pwd)"
port=18180

rm -rf "$scratch"
mkdir -p "$scratch"
git clone -q "$repo_root" "$scratch/repo"

rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"
echo "first-start: copying the Rust toolchain from $rustup_home (not timed)" >&2
cp -a "$rustup_home" "$scratch/rustup"
RUSTUP_HOME="$scratch/rustup" rustup target remove wasm32-unknown-unknown >/dev/null 2>&1 || true

export RUSTUP_HOME="$scratch/rustup" CARGO_HOME="$scratch/cargo" npm_config_cache="$scratch/npm-cache"
mkdir -p "$CARGO_HOME/bin"
# The toolchain's own commands (rustup and its proxies: cargo, rustc,
# cargo-fmt, cargo-clippy, …), and nothing else a `cargo install` left.
real_cargo_bin="$(dirname "$(command -v cargo)")"
for tool in "$real_cargo_bin"/*; do
  if [ "$(basename "$tool")" = rustup ] || [ "$(readlink "$tool")" = rustup ]; then
    ln -sf "$real_cargo_bin/$(basename "$tool")" "$CARGO_HOME/bin/"
  fi
done
PATH="$CARGO_HOME/bin:$(printf '%s' "$PATH" | tr ':' '\n' | grep -vx "$real_cargo_bin" | paste -sd:)"
export PATH

cd "$scratch/repo"
started=$(date +%s.%N)
# In a session of its own, so that the server it ends in stops with it.
setsid npm run demo -- --listen "127.0.0.1:$port" >"$scratch/demo.log" 2>&1 &
demo=$!
stop_demo() { kill -- "-$demo" 2>/dev/null || true; }
trap stop_demo EXIT
until curl -fsS -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; do
  if ! kill -0 "$demo" 2>/dev/null; then
    echo "first-start: npm run demo exited before it answered: $scratch/demo.log" >&2
    exit 1
  fi
  sleep 0.5
done
printf 'npm run demo answered after %.1f s (load average now: %s)\n' "$(echo "$(date +%s.%N) - $started" | bc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
stop_demo
wait "$demo" 2>/dev/null || true

if $run_tests; then
  started=$SECONDS
  if npm test >"$scratch/test.log" 2>&1; then result=passed; else result=FAILED; fi
  printf 'npm test %s after %d s (log: %s/test.log)\n' "$result" $((SECONDS - started)) "$scratch"
  [ "$result" = passed ]
fi
