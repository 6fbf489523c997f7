# Shared by the scripts in server/bench: start a server on a loopback port,
# wait for it, read its memory from /proc, stop it on exit.
# BIN (default target/server/taskwire-server) and PORT may be set.

BIN=${BIN:-target/server/taskwire-server}
PORT=${PORT:-18151}
BASE="http://127.0.0.1:$PORT"
SCRATCH=$(mktemp -d)
PID=

cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  rm -rf "$SCRATCH"
}
trap cleanup EXIT

# start_server ARGS…: the server on $PORT with a fresh data dir; waits (10 s at most).
start_server() {
  "$BIN" --listen "127.0.0.1:$PORT" --data "$SCRATCH/data" "$@" >"$SCRATCH/server.log" 2>&1 &
  PID=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "$BASE/v1/tasks" && return 0
    sleep 0.1
  done
  echo "server did not start:" >&2
  cat "$SCRATCH/server.log" >&2
  exit 1
}

# mem FIELD: VmRSS or VmHWM (peak) of the server, in MB.
mem() {
  awk -v f="$1:" '$1 == f { printf "%.1f MB", $2 / 1024 }' "/proc/$PID/status"
}
