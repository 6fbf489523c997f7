#!/usr/bin/env bash
# RSS of a server under steady churn for MINUTES (default 30): each second
# 300 tasks are created and taken through 5 callbacks, every 3rd task is
# watched by 4 long-polls on fresh connections and every 11th followed by
# an SSE stream (taskwire-load soak; its defaults are the churn that found
# the rise). One line a minute: RSS (anonymous, shared), rates reached,
# errors, jobs the load client could not keep up with; then the idle RSS
# and the slope over the second half. Loopback only, bounded by
# MINUTES.
#
#   BIN=target/server/taskwire-server LOAD=target/server/taskwire-load \
#     server/bench/soak.sh [MINUTES] [PASSES]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
LOAD=${LOAD:-target/server/taskwire-load}
MINUTES=${1:-30}
PASSES=${2:-1}

# Enough descriptors for the held long-polls and streams of both sides.
ulimit -n "$(ulimit -Hn)"
start_server --demo --token demo=demo
echo "RSS at start: $(mem VmRSS)"
"$LOAD" --addr "127.0.0.1:$PORT" soak --minutes "$MINUTES" --passes "$PASSES" --pid "$PID"
echo "peak RSS: $(mem VmHWM)"
