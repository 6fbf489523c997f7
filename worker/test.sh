#!/usr/bin/env bash
# The checks of the taskwire-worker crate alone: format, clippy, docs,
# then its tests against the real reference server (built first, so the
# tests find it in the target directory). `cargo test --workspace` (the
# project's scripts/test.sh) runs the same tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt -p taskwire-worker -- --check
cargo clippy -p taskwire-worker --all-targets --locked -- -D warnings
# Without TLS too (`http://` only, no ring), as a loopback user takes it.
cargo clippy -p taskwire-worker --no-default-features --all-targets --locked -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc -p taskwire-worker --no-deps --locked
cargo build -p taskwire-server --bin taskwire-server --locked
cargo test -p taskwire-worker --locked "$@"
