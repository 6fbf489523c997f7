#!/usr/bin/env bash
# RSS of a --demo server sending one large static file: a sparse file of
# SIZE (default 200M, no disk used) in the demo dir, fetched once with curl.
#
#   BIN=target/server/taskwire-server server/bench/static_big.sh [SIZE]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
SIZE=${1:-200M}

mkdir "$SCRATCH/root"
echo '<h1>demo</h1>' >"$SCRATCH/root/index.html"
truncate -s "$SIZE" "$SCRATCH/root/big.bin"
start_server --demo --demo-dir "$SCRATCH/root"
echo "RSS before: $(mem VmRSS), peak $(mem VmHWM)"
curl -s -o /dev/null -w 'served %{size_download} bytes (%{http_code}) in %{time_total} s\n' "$BASE/big.bin"
echo "after: RSS $(mem VmRSS), peak $(mem VmHWM)"
