#!/usr/bin/env bash
# Installs what a fresh machine lacks for building and testing taskwire,
# and does nothing when it is already there. Called by `npm test`,
# `npm run build` and `npm run demo`; safe to run by hand.
#
#   scripts/setup.sh            the wasm32 target + npm dependencies (what the demo
#                               and `npm run build` need: the build runs
#                               wasm-bindgen as the workspace's own
#                               tools/bindgen, so no CLI is installed)
#   scripts/setup.sh wasm-pack  … + wasm-pack and wasm-bindgen-cli (only
#                               `wasm-pack test` uses them: the CLI brings
#                               the test runner)
#   scripts/setup.sh browser    … + Chromium and chromedriver
#   scripts/setup.sh firefox    … + Firefox ESR and geckodriver (the second engine)
#   scripts/setup.sh postgres   … + PostgreSQL server binaries
set -euo pipefail
cd "$(dirname "$0")/.."

# Must equal the `=` pin of wasm-bindgen in wasm/Cargo.toml (and of
# wasm-bindgen-cli-support in tools/bindgen/Cargo.toml).
WASM_BINDGEN_VERSION=0.2.130
# geckodriver compiles from crates.io (~3 min once on 2 cores): the test
# machines reach no download site but the registries.
GECKODRIVER_VERSION=0.37.1

say() { printf 'setup: %s\n' "$*" >&2; }

need_rust() {
  command -v cargo >/dev/null || { say "cargo not found: install Rust with rustup (https://rustup.rs)"; exit 1; }
  if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    command -v rustup >/dev/null || { say "rustup not found: the wasm32-unknown-unknown target is added with rustup (https://rustup.rs)"; exit 1; }
    say "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
}

# Only the tests run `wasm-pack test`: the demo and the build never wait
# for these to compile. wasm-pack uses the `wasm-bindgen` on the PATH when
# its version matches the crate's, and the test runner installed beside it.
need_wasm_pack() {
  if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$WASM_BINDGEN_VERSION" ]; then
    say "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION for wasm-pack test (about 2.5 minutes, once)"
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
  fi
  if ! command -v wasm-pack >/dev/null; then
    say "installing wasm-pack (a few minutes, once)"
    cargo install wasm-pack
  fi
}

need_npm() {
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    say "installing npm dependencies"
    npm ci --no-audit --no-fund
  fi
}

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi
}

need_browser() {
  local chrome="${CHROME_BIN:-/usr/bin/chromium}" driver="${CHROMEDRIVER:-/usr/bin/chromedriver}"
  # openssl makes the throwaway certificate of the HTTP/2 page test
  # (tests/js/http2-page.test.mjs).
  if [ -x "$chrome" ] && [ -x "$driver" ] && command -v openssl >/dev/null; then return; fi
  if command -v apt-get >/dev/null && as_root true 2>/dev/null; then
    say "installing Chromium, chromedriver and openssl with apt"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium chromium-driver openssl >/dev/null
  else
    say "Chromium, chromedriver and openssl are needed for the browser tests."
    say "Install them (Debian: apt-get install chromium chromium-driver openssl), or set"
    say "CHROME_BIN and CHROMEDRIVER to an existing Chrome/Chromium and matching chromedriver."
    exit 1
  fi
}

need_firefox() {
  local firefox="${FIREFOX_BIN:-/usr/bin/firefox-esr}"
  if [ ! -x "$firefox" ]; then
    if command -v apt-get >/dev/null && as_root true 2>/dev/null; then
      say "installing Firefox ESR with apt"
      as_root apt-get update -qq
      DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq firefox-esr >/dev/null
    else
      say "Firefox is needed for the second-engine browser tests: install firefox-esr, or set FIREFOX_BIN."
      exit 1
    fi
  fi
  if [ "$(geckodriver --version 2>/dev/null | awk 'NR==1{print $2}')" != "$GECKODRIVER_VERSION" ]; then
    say "installing geckodriver $GECKODRIVER_VERSION (a few minutes, once)"
    cargo install geckodriver --version "$GECKODRIVER_VERSION" --locked --force
  fi
}

need_postgres() {
  if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null; then return; fi
  if command -v apt-get >/dev/null && as_root true 2>/dev/null; then
    say "installing PostgreSQL with apt"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq postgresql >/dev/null
  else
    say "PostgreSQL server binaries (initdb, pg_ctl) are needed for the scale-out tests."
    exit 1
  fi
}

need_rust
need_npm
for extra in "$@"; do
  case "$extra" in
    wasm-pack) need_wasm_pack ;;
    browser) need_browser ;;
    firefox) need_firefox ;;
    postgres) need_postgres ;;
    *) say "unknown extra: $extra"; exit 2 ;;
  esac
done
