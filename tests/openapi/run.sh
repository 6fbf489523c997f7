#!/usr/bin/env bash
# docs/openapi.yaml held to the reference server, both ways (`npm test`):
#
#   bash tests/openapi/run.sh [path/to/taskwire-server]
#
# 1. statuses.py: every status the description documents is produced by a
#    request, and every answer validates against the documented schema and
#    headers (and nothing undocumented is produced).
# 2. schemathesis fuzzes every operation (examples, coverage, fuzzing and
#    stateful phases, every check) with the hooks of hooks.py: real tasks
#    and batches in the path, signed executor callbacks and worker claims.
#    It must find no 5xx, no answer outside the description, and no crash
#    (the server is alive at the end).
#
# Bounded: 15 generated cases per operation and phase (OPENAPI_EXAMPLES), a
# fixed seed (OPENAPI_SEED), and a hard stop after 300 s. Installs
# schemathesis on first use (tests/openapi/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."

server="${1:-${CARGO_TARGET_DIR:-target}/debug/taskwire-server}"
examples="${OPENAPI_EXAMPLES:-15}"
seed="${OPENAPI_SEED:-13}"
[ -x "$server" ] || { echo "no server at $server: cargo build -p taskwire-server" >&2; exit 1; }
venv="$(bash tests/openapi/setup.sh)"
py="$venv/bin/python"

dir="$(mktemp -d)"
port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export TASKWIRE_BASE_URL="http://127.0.0.1:$port"
export TASKWIRE_TOKEN="tok_$("$py" -c 'import secrets; print(secrets.token_hex(16))')"
export TASKWIRE_CALLBACK_SECRET="whsec_$("$py" -c 'import base64, secrets; print(base64.b64encode(secrets.token_bytes(32)).decode())')"
export TASKWIRE_SEED="$seed"
# The tenants the server runs with below: tenant-a is the one fuzzing acts
# as (hooks.py names it in the claims it signs), tenant-q the quota one.
export TASKWIRE_TENANT=tenant-a TASKWIRE_QUOTA_TENANT=tenant-q
# A second tenant with small quotas (429s, statuses.py): one create, then
# one per 100 s, and one held watch. Fuzzing uses the first tenant only.
export TASKWIRE_QUOTA_TOKEN="tok_$("$py" -c 'import secrets; print(secrets.token_hex(16))')"
export TASKWIRE_QUOTA_SECRET="whsec_$("$py" -c 'import base64, secrets; print(base64.b64encode(secrets.token_bytes(32)).decode())')"
# A browser-token key of the tenant (HS256, 32 random bytes): statuses.py
# mints tokens with it, as an application's backend would (403s).
export TASKWIRE_BROWSER_KEY="$("$py" -c 'import base64, secrets; print(base64.b64encode(secrets.token_bytes(32)).decode())')"

# --body-timeout-ms and --max-watchers make 408 and 503 watch-limit
# producible on demand (statuses.py); fuzzing sends whole bodies and holds
# at most one watch at a time. tenant-q's quotas make the 429s producible;
# tenant-a lifts the default half of the slots a tenant of several holds,
# so that it can fill the server and meet its 503.
mkdir "$dir/data"
"$server" --listen "127.0.0.1:$port" --data "$dir/data" --token "$TASKWIRE_TOKEN=tenant-a" \
  --token "$TASKWIRE_QUOTA_TOKEN=tenant-q" --callback-secret "tenant-q=$TASKWIRE_QUOTA_SECRET" \
  --tenant-quota "tenant-q:create-rate=0.01,create-burst=1,max-watches=1" \
  --tenant-quota "tenant-a:max-watches=off" \
  --callback-secret "tenant-a=$TASKWIRE_CALLBACK_SECRET" --body-timeout-ms 300 --max-watchers 4 \
  --browser-token-key "tenant-a:k1=HS256:$TASKWIRE_BROWSER_KEY" \
  >"$dir/server.log" 2>&1 &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
up=0
for _ in $(seq 200); do
  if "$py" -c 'import os, sys, urllib.request
req = urllib.request.Request(os.environ["TASKWIRE_BASE_URL"] + "/v1/notifications", headers={"authorization": "Bearer " + os.environ["TASKWIRE_TOKEN"]})
urllib.request.urlopen(req, timeout=1)' 2>/dev/null; then
    up=1
    break
  fi
  sleep 0.1
done
[ "$up" = 1 ] || { echo "the server did not answer within 20 s" >&2; cat "$dir/server.log" >&2; exit 1; }

status=0
"$py" tests/openapi/statuses.py || status=1
# Run from the temporary directory: schemathesis keeps a crash cache in
# ./.schemathesis, and each run starts from nothing.
root="$PWD"
(cd "$dir" && SCHEMATHESIS_HOOKS="$root/tests/openapi/hooks.py" timeout 300 "$venv/bin/schemathesis" \
  --config-file "$root/tests/openapi/schemathesis.toml" run "$root/docs/openapi.yaml" \
  --url "$TASKWIRE_BASE_URL" --header "Authorization: Bearer $TASKWIRE_TOKEN" \
  --checks all --max-examples "$examples" --seed "$seed" --request-timeout 10 \
  --suppress-health-check too_slow --report-dir "$dir/report") || status=1
if ! kill -0 "$pid" 2>/dev/null; then
  echo "the server exited during the run" >&2
  status=1
fi
if [ "$status" != 0 ]; then
  echo "── server log (last 40 lines) ──" >&2
  tail -40 "$dir/server.log" >&2
fi
exit "$status"
