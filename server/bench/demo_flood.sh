#!/usr/bin/env bash
# RSS of a --demo server flooded with workload starts: N requests (default
# 10,000) to POST /v1/demo/workloads/long at SPEED (default 0.1), 50 at a
# time over keep-alive (curl --parallel), then the answers by status.
# Loopback only, bounded by N.
#
#   BIN=target/server/taskwire-server server/bench/demo_flood.sh [N] [SPEED]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${1:-10000}
SPEED=${2:-0.1}

start_server --demo --token demo=demo
echo "RSS before: $(mem VmRSS)"
for _ in $(seq "$N"); do
  printf 'url = "%s/v1/demo/workloads/long"\noutput = /dev/null\n' "$BASE"
done >"$SCRATCH/urls"
t0=$(date +%s.%N)
curl -s --no-progress-meter --parallel --parallel-max 50 -K "$SCRATCH/urls" -X POST \
  -H 'authorization: Bearer demo' -H 'content-type: application/json' \
  -d "{\"speed\": $SPEED}" -w '%{http_code}\n' | sort | uniq -c
t1=$(date +%s.%N)
echo "after $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s: RSS $(mem VmRSS), peak $(mem VmHWM)"
sleep 2
echo "2 s later: RSS $(mem VmRSS)"
