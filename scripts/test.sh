#!/usr/bin/env bash
# The one test command (`npm test`): every check CI runs, in order. It
# installs what a fresh machine lacks first (scripts/setup.sh) and does
# nothing extra when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step is numbered and timed, so a long run shows how far it is: on
# a warm 2-core machine the whole run takes about 18 minutes; the first
# run on a fresh one also installs and compiles the tools (docs/benchmarks.md, "The
# first start").
steps_total=$(grep -c '^step "' scripts/test.sh)
step_number=0
step_started=$SECONDS
step() {
  if [ "$step_number" -gt 0 ]; then printf '== step %d took %d s (%d s in all)\n' "$step_number" $((SECONDS - step_started)) "$SECONDS"; fi
  step_number=$((step_number + 1))
  step_started=$SECONDS
  printf '\n== [%d/%d] %s\n' "$step_number" "$steps_total" "$*"
}

step "setup (installs only what is missing)"
bash scripts/setup.sh wasm-pack browser firefox postgres
# The PostgreSQL tests start their own throwaway server (scripts/pg.sh);
# here they must run, not skip.
export TASKWIRE_PG_REQUIRED=1
export CHROME_BIN="${CHROME_BIN:-/usr/bin/chromium}"
export CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}"
export FIREFOX_BIN="${FIREFOX_BIN:-/usr/bin/firefox-esr}"
# Likewise both browser engines must run.
export TASKWIRE_BROWSERS_REQUIRED=1

step "rust: format"
cargo fmt --all -- --check

step "rust: clippy (-D warnings), native and wasm32"
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy -p taskwire-wasm --all-targets --target wasm32-unknown-unknown --locked -- -D warnings

step "rust: tests (core unit, vectors, properties, server on SQLite and PostgreSQL)"
cargo test --workspace --locked

step "python: the worker library (ruff, mypy --strict, pytest against the real server)"
# Makes its venv under ~/.cache/taskwire/venv-worker once (python3.11).
cargo build --locked -p taskwire-server --bin taskwire-server
bash scripts/test-python.sh "${CARGO_TARGET_DIR:-target}/debug/taskwire-server"

step "npm package: build (fails above the size budget)"
node scripts/build.mjs --no-setup

step "npm package: types (tsc --noEmit)"
npx tsc -p tests/js

step "reference server: build (the client and conformance tests run against it)"
cargo build --locked -p taskwire-server

step "npm package: vectors, API, bad input, packed tarball, client (Node + Vite + Chromium + Firefox)"
node --test tests/js/

step "conformance: the suite's own helpers, then the reference server"
node --test tests/conformance/self.test.mjs
node tests/conformance/local.mjs --server "${CARGO_TARGET_DIR:-target}/debug/taskwire-server" --cors-origin http://127.0.0.1:5173

step "OpenAPI description (docs/openapi.yaml): every status produced and valid, then schemathesis (tests/openapi)"
# Installs schemathesis into a venv outside the repository on first use.
bash tests/openapi/run.sh "${CARGO_TARGET_DIR:-target}/debug/taskwire-server"

step "demo page: end to end in Chromium, through real outages; a standard EventSource stops at the end (tests/e2e)"
# Uses the package build above and the debug server built for conformance
# (eventsource.test.mjs also starts the node backend).
node --test tests/e2e/

step "scale-out: two server instances on one PostgreSQL (conformance on each, client failover)"
node --test tests/cluster/

step "node backend (examples/node-backend): its tests, the conformance suite, then the suite against its deliberate misreadings"
node --test examples/node-backend/
node tests/conformance/local.mjs --server "node examples/node-backend/server.mjs" --cors-origin http://127.0.0.1:5173 --no-workers
# The suite fails each deliberate misreading of the node backend (TASKWIRE_MISREAD), naming the rule.
node --test tests/conformance/misreadings.test.mjs

step "wasm bindings: wasm-pack test --node, --headless --chrome and --headless --firefox"
wasm-pack test --node wasm
WASM_BINDGEN_USE_BROWSER=1 wasm-pack test --headless --chrome wasm
WASM_BINDGEN_USE_BROWSER=1 wasm-pack test --headless --firefox wasm

printf '== step %d took %d s\n' "$step_number" $((SECONDS - step_started))
echo
echo "all checks passed in $SECONDS s"
