#!/usr/bin/env bash
# How long tenant B waits for a 404 on tenant A's task (a 54 KB input)
# against a 404 on an id that does not exist: N GETs each (default 2,000)
# over one keep-alive connection, one curl process; per-request times
# (curl's time_total: median and p90) and the whole process.
#
#   BIN=target/server/taskwire-server server/bench/tenant_timing.sh [N]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${1:-2000}

start_server --token a=tenant-a --token b=tenant-b
# 54 KB of small values (9,000 numbers): what parsing a row costs grows
# with the values in it, not only with its bytes.
values=$(seq 10000 19000 | paste -sd, -)
printf '{"ttlMs":3600000,"maxAttempts":1,"input":{"values":[%s]}}' "$values" >"$SCRATCH/body"
id=$(curl -s -H 'authorization: Bearer a' -H 'content-type: application/json' \
  --data-binary @"$SCRATCH/body" "$BASE/v1/tasks" | sed 's/.*"id":"\([^"]*\)".*/\1/')

run() { # run LABEL ID
  for _ in $(seq "$N"); do printf 'url = "%s/v1/tasks/%s"\noutput = /dev/null\n' "$BASE" "$2"; done >"$SCRATCH/urls"
  local t0 t1
  t0=$(date +%s.%N)
  curl -s -K "$SCRATCH/urls" -H 'authorization: Bearer b' -w '%{http_code} %{time_total}\n' >"$SCRATCH/times"
  t1=$(date +%s.%N)
  sort -k2 -n "$SCRATCH/times" | awk -v label="$1" -v a="$t0" -v b="$t1" '
    { code[$1]++; t[NR] = $2 }
    END {
      for (c in code) codes = codes c "×" code[c] " "
      printf "%-22s %s median %.3f ms, p90 %.3f ms; whole process %.2f s\n",
        label, codes, t[int(NR / 2)] * 1000, t[int(NR * 0.9)] * 1000, b - a
    }'
}
run "A's task (54 KB):" "$id"
run "unknown id:" "tsk_00000000000000000000000000000000"
run "A's task (54 KB):" "$id"
run "unknown id:" "tsk_00000000000000000000000000000000"
