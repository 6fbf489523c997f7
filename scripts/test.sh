#!/usr/bin/env bash
# The one test command (`npm test`): every check CI runs, in order, each
# runnable alone. Installs what a fresh machine lacks (see scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "rust: format"
cargo fmt --all -- --check

step "rust: clippy (-D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "rust: tests (core unit, vectors, properties)"
cargo test --workspace --locked

echo
echo "all checks passed"
