#!/usr/bin/env bash
# What the `max-open-tasks` quota costs a create on SQLite (server/README.md
# "Quotas"), on a file whose schema the server made, with OPEN open tasks
# (and as many ended ones) of tenant `a` among 100,000 tasks of tenant `b`:
# - the read each such create runs in the writer's transaction,
#     SELECT open FROM open_tasks WHERE tenant = ?
#   against counting the tenant's live tasks, which it replaced
#   (`count(*) … LIMIT`, over an index of the live tasks made here for it);
# - what the triggers that keep `open_tasks` add to each task insert.
# Each figure: 2,000 statements, minus 2,000 `SELECT 1` (the CLI's cost).
#
#   BIN=target/server/taskwire-server server/bench/open_task_count.sh [OPEN…]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ "$#" -gt 0 ] || set -- 10 1000 10000
RUNS=2000

start_server --token a=a --token b=b
kill "$PID" && wait "$PID" 2>/dev/null || true
PID=
DB="$SCRATCH/data/taskwire.sqlite3"
sqlite3 "$DB" "CREATE INDEX live_by_tenant ON tasks (tenant) WHERE live = 1;
  WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
  INSERT INTO tasks (id, tenant, view, version, live, expires_at_ms)
  SELECT 'b' || i, 'b', '{}', 0, i % 2, 0 FROM n;"

us() { # us SQL [SETUP]: µs per run of SQL (RUNS runs in one transaction)
  local file="$SCRATCH/q.sql" i
  { echo "${2:-}"; echo "BEGIN;"; for i in $(seq "$RUNS"); do echo "${1//@/$i}"; done; echo "ROLLBACK;"; } >"$file"
  local t0 t1
  t0=$(date +%s.%N)
  sqlite3 "$DB" <"$file" >/dev/null
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" -v n="$RUNS" 'BEGIN { print (b - a) / n * 1e6 }'
}

base=$(us "SELECT 1;")
for OPEN in "$@"; do
  sqlite3 "$DB" "DELETE FROM tasks WHERE tenant = 'a';
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $((OPEN * 2)))
    INSERT INTO tasks (id, tenant, view, version, live, expires_at_ms)
    SELECT 'a' || i, 'a', '{}', 0, i % 2, 0 FROM n; ANALYZE;"
  row=$(us "SELECT open FROM open_tasks WHERE tenant = 'a';")
  count=$(us "SELECT count(*) FROM (SELECT 1 FROM tasks WHERE tenant = 'a' AND live = 1 LIMIT $((OPEN + 1)));")
  awk -v o="$OPEN" -v r="$row" -v c="$count" -v b="$base" \
    'BEGIN { printf "%6d open: the counter row %.1f µs, a count of the live tasks %.1f µs\n", o, r - b, c - b }'
done
insert="INSERT INTO tasks (id, tenant, view, version, live, expires_at_ms) VALUES ('n@', 'a', '{}', 0, 1, 0);"
with=$(us "$insert")
without=$(us "$insert" "DROP TRIGGER open_tasks_insert;")
awk -v w="$with" -v wo="$without" \
  'BEGIN { printf "a task insert: %.1f µs with the triggers, %.1f µs without\n", w, wo }'
