#!/usr/bin/env bash
# Storage per task, on SQLite and on PostgreSQL: builds the server and the
# load tool, then for each store starts a fresh server, runs
# `taskwire-load fill` (N tasks, each through start, three progress steps
# and succeed, 5 signed callbacks) and prints the bytes per task, in all
# and per table and index (server/README.md, "Storage per task").
#
#   bash bench/storage.sh [TASKS]          default 50000 (~2 min per store
#                                          on 2 cores, debug build)
#
# Bytes per task do not depend on TASKS much (the rows are the same size
# however many there are); a few thousand tasks give the same numbers
# within ~2 %. PostgreSQL is a throwaway cluster (scripts/pg.sh: initdb in
# a temporary directory, deleted at the end); its binaries come from
# $PG_BIN or /usr/lib/postgresql/*/bin (`scripts/setup.sh postgres`
# installs them). STORES="sqlite" or "postgres" runs one of them.
# Sizes do not depend on the build profile: the debug build is used
# (CARGO_TARGET_DIR is honoured). BIN_DIR=DIR uses the taskwire-server and
# taskwire-load already in DIR instead (to measure another commit's).
set -euo pipefail

tasks="${1:-50000}"
stores="${STORES:-sqlite postgres}"
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
port="${PORT:-18232}"
pg_port="${PG_PORT:-18239}"

if [ -n "${BIN_DIR:-}" ]; then
  bin="$BIN_DIR"
else
  (cd "$root" && cargo build -q -p taskwire-server --bins)
  bin="$target/debug"
fi

scratch="$(mktemp -d /tmp/taskwire-storage.XXXXXX)"
# As root, scripts/pg.sh runs PostgreSQL as `postgres`, which must reach
# its directory inside this one.
chmod 755 "$scratch"
server_pid=""
pg_started=false
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  if $pg_started; then bash "$root/scripts/pg.sh" stop "$scratch/pg" >/dev/null 2>&1 || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT

# Starts the server on DATA (a directory or a URL) and waits for its port.
start_server() {
  "$bin/taskwire-server" --listen "127.0.0.1:$port" --data "$1" >"$scratch/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return; fi
    if ! kill -0 "$server_pid" 2>/dev/null; then cat "$scratch/server.log" >&2; exit 1; fi
    sleep 0.1
  done
  echo "storage.sh: the server did not listen on $port" >&2
  exit 1
}

stop_server() {
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

for store in $stores; do
  case "$store" in
    sqlite)
      echo "== SQLite, $tasks tasks"
      start_server "$scratch/sqlite"
      "$bin/taskwire-load" --addr "127.0.0.1:$port" fill --tasks "$tasks" \
        --db "$scratch/sqlite/taskwire.sqlite3"
      stop_server
      ;;
    postgres)
      echo "== PostgreSQL, $tasks tasks"
      url="$(bash "$root/scripts/pg.sh" start "$scratch/pg" "$pg_port")"
      pg_started=true
      start_server "$url"
      "$bin/taskwire-load" --addr "127.0.0.1:$port" fill --tasks "$tasks" --db "$url"
      stop_server
      ;;
    *)
      echo "storage.sh: unknown store '$store' (sqlite or postgres)" >&2
      exit 2
      ;;
  esac
done
