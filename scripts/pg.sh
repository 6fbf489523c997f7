#!/usr/bin/env bash
# A throwaway PostgreSQL server for the scale-out tests and benchmarks:
# initdb in DIR, listening on 127.0.0.1:PORT only (trust auth, user
# `postgres`, socket in DIR), started with pg_ctl. As root the server runs
# as the `postgres` user (DIR is created and owned by it); otherwise as
# the current user.
#
#   scripts/pg.sh start DIR PORT   init (if needed) and start; prints the URL
#   scripts/pg.sh stop DIR         stop (fast shutdown)
#   scripts/pg.sh run DIR PORT     start, print "ready URL", then stop and
#                                  delete DIR when standard input closes
#                                  (tests keep a pipe to it: however they
#                                  end, the server goes with them)
#
# Binaries: $PG_BIN, else the newest /usr/lib/postgresql/*/bin, else PATH.
# `scripts/setup.sh postgres` installs them when missing.
set -euo pipefail
shopt -s inherit_errexit

say() { printf 'pg.sh: %s\n' "$*" >&2; }

bin_dir() {
  if [ -n "${PG_BIN:-}" ]; then
    if [ -x "$PG_BIN/initdb" ]; then echo "$PG_BIN"; return; fi
    say "PG_BIN=$PG_BIN has no initdb"
    exit 3
  fi
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; return; fi
  if command -v initdb >/dev/null; then dirname "$(command -v initdb)"; return; fi
  say "PostgreSQL server binaries not found (scripts/setup.sh postgres installs them)"
  exit 3
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then
    if command -v runuser >/dev/null; then runuser -u postgres -- "$@"; else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi
  else
    "$@"
  fi
}

start() {
  local dir="$1" port="$2" bin
  bin="$(bin_dir)"
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; chmod 700 "$dir"; fi
  if [ ! -f "$dir/PG_VERSION" ]; then
    as_pg "$bin/initdb" -D "$dir" -U postgres --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir.initdb.log" 2>&1 \
      || { cat "$dir.initdb.log" >&2; exit 1; }
    rm -f "$dir.initdb.log"
  fi
  # Defaults otherwise (fsync and synchronous_commit on: commits are
  # durable). max_connections covers two instances' pools and listeners
  # plus the benchmark's.
  as_pg "$bin/pg_ctl" -D "$dir" -w -t 60 -l "$dir/server.log" \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200 -c shared_buffers=128MB" \
    start </dev/null >/dev/null || { tail -n 20 "$dir/server.log" >&2; exit 1; }
  echo "postgres://postgres@127.0.0.1:$port/postgres"
}

stop() {
  local dir="$1"
  [ -f "$dir/postmaster.pid" ] || return 0
  as_pg "$(bin_dir)/pg_ctl" -D "$dir" -m fast -w stop </dev/null >/dev/null 2>&1 \
    || as_pg "$(bin_dir)/pg_ctl" -D "$dir" -m immediate -w stop </dev/null >/dev/null 2>&1 || true
}

case "${1:-}" in
  start) [ $# = 3 ] || { say "usage: pg.sh start DIR PORT"; exit 2; }; start "$2" "$3" ;;
  stop) [ $# = 2 ] || { say "usage: pg.sh stop DIR"; exit 2; }; stop "$2" ;;
  run)
    [ $# = 3 ] || { say "usage: pg.sh run DIR PORT"; exit 2; }
    dir="$2"
    bin_dir >/dev/null # exit 3 when PostgreSQL is not installed
    trap 'stop "$dir"; rm -rf "$dir"' EXIT
    trap 'exit 1' INT TERM HUP
    url="$(start "$dir" "$3")"
    echo "ready $url"
    # Until whoever started us closes the pipe (or dies).
    cat >/dev/null || true
    ;;
  *) say "usage: pg.sh start|stop|run DIR [PORT]"; exit 2 ;;
esac
