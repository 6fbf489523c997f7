"""docs/openapi.yaml against a running reference server, status by status.

First the document itself: a valid OpenAPI 3.1 description (the OAS 3.1
meta-schema that schemathesis ships), and each of its schemas a valid
JSON Schema 2020-12. Then every status the description documents for an operation is produced by
one request below, and its answer validates against the documented
schema and headers. Statuses the server gives only when something is
wrong on its side (500, 503 storage-unavailable) cannot be produced on
demand and are listed in NOT_PRODUCIBLE with the reason; any other
documented status without a request here fails the run, and so does a
request here for a status the description does not document.

The server must run with `--body-timeout-ms 300 --max-watchers 4` (408 and
503 watch-limit), one tenant and one HS256 browser-token key `k1` of it
(403; batch tokens carry a `batch` claim), and a second tenant
(TASKWIRE_QUOTA_TOKEN, callback secret TASKWIRE_QUOTA_SECRET) with
`create-rate=0.01,create-burst=1,max-watches=1` (429: its one create is a
batch of one item, whose task the watch quotas hold):
TASKWIRE_BASE_URL, TASKWIRE_TOKEN, TASKWIRE_CALLBACK_SECRET,
TASKWIRE_BROWSER_KEY (the key, base64), and the two tenants' names
TASKWIRE_TENANT and TASKWIRE_QUOTA_TENANT (claims name their tenant), as
tests/openapi/run.sh starts it.
"""

import json
import sys
import time
import uuid
from pathlib import Path

import jsonschema_rs
import requests
import yaml

sys.path.insert(0, str(Path(__file__).parent))
# The parties' requests (the backend, its executor, tokens, held watches).
from hooks import sign  # noqa: E402
from parties import (  # noqa: E402
    AUTH,
    BASE,
    ITEM,
    QUOTA_AUTH,
    QUOTA_TENANT,
    START,
    SUCCEED,
    append_output,
    batch,
    browser_token,
    callback,
    claim,
    claim_headers,
    create,
    create_batch,
    quota_sign,
    raw_partial,
    task,
    watch_limit,
    watch_quota,
)

ROOT = Path(__file__).resolve().parents[2]

NOT_PRODUCIBLE = {
    "500": "a server bug or corrupt stored data (server/tests/faults.rs corrupts rows to see it)",
    "503": "storage-unavailable needs a failing disk or database (server/tests/faults.rs); "
    "watch-limit is produced below for resume, events and claims",
}

doc = yaml.safe_load((ROOT / "docs/openapi.yaml").read_text())


def resolve(node):
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"].removeprefix("#/").split("/")
        node = doc
        for part in ref:
            node = node[part]
    return node


def validator(schema):
    wrapper = {"$schema": "https://json-schema.org/draft/2020-12/schema", "components": doc["components"], **schema}
    return jsonschema_rs.validator_for(wrapper)


def check_answer(op_id, status, res, documented):
    """The answer against the documented response: headers and body."""
    response = resolve(documented[status])
    for name, header in (response.get("headers") or {}).items():
        value = res.headers.get(name)
        assert value is not None, f"{op_id} {status}: header {name} missing"
        errors = list(validator(resolve(header)["schema"]).iter_errors(value))
        assert not errors, f"{op_id} {status}: header {name}={value!r}: {errors[0]}"
    content = response.get("content")
    if not content:
        assert res.content == b"", f"{op_id} {status}: documented without a body, got {res.content[:200]!r}"
        return
    (media, spec), = content.items()
    assert res.headers.get("content-type", "").startswith(media), f"{op_id} {status}: Content-Type {res.headers.get('content-type')}"
    if media == "application/json":
        body = json.loads(res.content)
        errors = list(validator(spec["schema"]).iter_errors(body))
        assert not errors, f"{op_id} {status}: body does not validate: {errors[0]}\n{res.text[:500]}"
    elif media == "text/event-stream":
        events = [block for block in res.text.split("\n\n") if block.startswith("event:")]
        assert events, f"{op_id} {status}: no event in {res.text[:300]!r}"
        # `contentSchema` is an annotation in JSON Schema: each message's
        # `data` is parsed and validated against it here.
        # A stream of several kinds of message (`oneOf`): each is checked
        # against the one its `event` names.
        top = resolve(spec["schema"])
        kinds = [resolve(k) for k in top.get("oneOf", [top])]
        for block in events:
            fields = dict(line.split(": ", 1) for line in block.splitlines())
            kind = next((k for k in kinds if k["properties"]["event"].get("const") == fields.get("event")), kinds[0])
            data_schema = kind["properties"]["data"]["contentSchema"]
            errors = list(validator(spec["schema"]).iter_errors(fields))
            assert not errors, f"{op_id} {status}: event does not validate: {errors[0]}"
            answer = json.loads(fields["data"])
            errors = list(validator(data_schema).iter_errors(answer))
            assert not errors, f"{op_id} {status}: event data does not validate: {errors[0]}"


# ---- one request per documented status --------------------------------------


def claimed_one(res):
    """A claim's answer that took the one task queued for its kinds."""
    if res.status_code == 200:
        tasks = res.json()["tasks"]
        assert len(tasks) == 1, f"claimWork 200: expected the one task queued, got {len(tasks)}"
        assert tasks[0]["lease"]["attempt"] == tasks[0]["attempts"] == 1, f"claimWork 200: {tasks[0]}"
    return res


def recipes():
    running, done = task(START), task(START, SUCCEED)
    key = f"k_{uuid.uuid4().hex}"
    create({"ttlMs": 60_000, "maxAttempts": 1}, key)
    delivered = f"d_{uuid.uuid4().hex}"
    requests.post(f"{BASE}/v1/tasks/{done}/deliveries", headers={**AUTH, "idempotency-key": delivered}, timeout=10)
    used = f"cb_{uuid.uuid4().hex}"
    assert callback(running, {"type": "progress", "atMs": 3, "progress": 9, "cursor": "c"}, used).status_code == 200
    other = task()
    big = json.dumps({"ttlMs": 1000, "maxAttempts": 1, "input": "x" * 70_000})
    get = lambda path, **kw: requests.get(f"{BASE}{path}", headers={**AUTH, **kw.pop("headers", {})}, timeout=10, **kw)  # noqa: E731
    post = lambda path, **kw: requests.post(f"{BASE}{path}", headers={**AUTH, **kw.pop("headers", {})}, timeout=10, **kw)  # noqa: E731
    # Browser tokens that lack the right each operation needs (403).
    bearer = lambda token: {"authorization": f"Bearer {token}"}  # noqa: E731
    no_watch = bearer(browser_token([running, done], ["cancel"]))
    watch_only = bearer(browser_token([running, done], ["watch"]))
    # The quota tenant's one create (its burst) is a batch of one item: its
    # task and the batch, for the watch 429s; every later create is 429.
    quota_created = create_batch([ITEM], auth=QUOTA_AUTH).json()
    quota_batch, quota_task = quota_created["batchId"], quota_created["tasks"][0]["id"]
    assert callback(quota_task, START, signer=quota_sign).status_code == 200
    # Batches: one live (an item running), one with every item terminal.
    live_batch, _, live_cursor = batch([START], [])
    done_batch, _, done_cursor = batch([START, SUCCEED], [{"type": "expire", "atMs": 2}])
    # A batch of its own to cancel (one item running, one queued).
    to_cancel, _, _ = batch([START], [])
    batch_key = f"k_{uuid.uuid4().hex}"
    assert create_batch([ITEM, ITEM], batch_key).status_code == 201
    # Bigger than a task body's 64 KiB, within a batch body's 1 MiB.
    wide = [{**ITEM, "input": "x" * 40_000}] * 3
    huge = json.dumps({"items": [{**ITEM, "input": "x" * (1024 * 1024)}]})
    watches_done = bearer(browser_token(None, ["watch"], batch=done_batch))
    cancels_done = bearer(browser_token(None, ["cancel"], batch=done_batch))
    # Claims: a task of a kind of its own to take; other claims name kinds
    # nothing is queued for, so that they take none of the tasks above.
    claim_kind, idle_kind = f"claim-{uuid.uuid4().hex[:8]}", f"idle-{uuid.uuid4().hex[:8]}"
    assert create({"ttlMs": 3_600_000, "maxAttempts": 2, "kind": claim_kind, "input": {"n": 1}}).status_code == 201
    idle = {"worker": "openapi", "kinds": [idle_kind]}
    replayed = json.dumps(idle).encode()
    replayed_headers = claim_headers(replayed)
    assert claim(raw=replayed, headers=replayed_headers).status_code == 200
    cb_headers = lambda tid, body: {"webhook-id": "cb_partial", "webhook-timestamp": str(int(time.time())), "webhook-signature": sign("cb_partial", str(int(time.time())), body)}  # noqa: E731
    return {
        "createTask": {
            "201": lambda: create(),
            "200": lambda: create({"ttlMs": 60_000, "maxAttempts": 1}, key),
            "400": lambda: create({"ttlMs": -1, "maxAttempts": 1}),
            "401": lambda: requests.post(f"{BASE}/v1/tasks", json={"ttlMs": 1, "maxAttempts": 1}, timeout=10),
            "403": lambda: post("/v1/tasks", json={"ttlMs": 60_000, "maxAttempts": 1}, headers=watch_only),
            "408": lambda: raw_partial("/v1/tasks", AUTH),
            "413": lambda: post("/v1/tasks", data=big, headers={"content-type": "application/json"}),
            "422": lambda: create({"ttlMs": 60_000, "maxAttempts": 2}, key),
            "429": lambda: requests.post(f"{BASE}/v1/tasks", json={"ttlMs": 60_000, "maxAttempts": 1}, headers=QUOTA_AUTH, timeout=10),
        },
        "getTask": {
            "200": lambda: get(f"/v1/tasks/{running}"),
            "400": lambda: get(f"/v1/tasks/{'t' * 256}"),
            "401": lambda: requests.get(f"{BASE}/v1/tasks/{running}", timeout=10),
            "403": lambda: get(f"/v1/tasks/{running}", headers=no_watch),
            "404": lambda: get("/v1/tasks/no-such-task"),
        },
        "getTaskTimeline": {
            "200": lambda: get(f"/v1/tasks/{done}/timeline"),
            "400": lambda: get(f"/v1/tasks/{'t' * 256}/timeline"),
            "401": lambda: requests.get(f"{BASE}/v1/tasks/{done}/timeline", timeout=10),
            "403": lambda: get(f"/v1/tasks/{running}/timeline", headers=no_watch),
            "404": lambda: get("/v1/tasks/no-such-task/timeline"),
        },
        "resumeTask": {
            "200": lambda: get(f"/v1/tasks/{running}/resume?cursor=0"),
            "400": lambda: get(f"/v1/tasks/{running}/resume?cursor=3.0"),
            "401": lambda: requests.get(f"{BASE}/v1/tasks/{running}/resume?cursor=0", timeout=10),
            "403": lambda: get(f"/v1/tasks/{running}/resume?cursor=0", headers=no_watch),
            "404": lambda: get("/v1/tasks/no-such-task/resume?cursor=0"),
            "503": lambda: watch_limit(lambda live: f"/v1/tasks/{live}/resume?cursor=1&waitMs=5000"),
            "429": lambda: watch_quota(quota_task, lambda v: f"/v1/tasks/{quota_task}/resume?cursor={v}&waitMs=5000"),
        },
        "streamTaskEvents": {
            "200": lambda: get(f"/v1/tasks/{done}/events?cursor=0"),
            "204": lambda: get(f"/v1/tasks/{done}/events", headers={"last-event-id": "2"}),
            "400": lambda: get(f"/v1/tasks/{done}/events", headers={"last-event-id": "x"}),
            "401": lambda: requests.get(f"{BASE}/v1/tasks/{done}/events", timeout=10),
            "403": lambda: get(f"/v1/tasks/{running}/events", headers=no_watch),
            "404": lambda: get("/v1/tasks/no-such-task/events"),
            "503": lambda: watch_limit(lambda live: f"/v1/tasks/{live}/events?cursor=1"),
            "429": lambda: watch_quota(quota_task, lambda v: f"/v1/tasks/{quota_task}/events?cursor={v}"),
        },
        "createBatch": {
            "201": lambda: create_batch(wide),
            "200": lambda: create_batch([ITEM, ITEM], batch_key),
            "400": lambda: create_batch([ITEM, {**ITEM, "ttlMs": -1}]),
            "401": lambda: create_batch([ITEM], auth={}),
            "403": lambda: create_batch([ITEM], auth=watch_only),
            "408": lambda: raw_partial("/v1/batches", AUTH),
            "413": lambda: create_batch(None, data=huge),
            # A key of a single create is refused for a batch: one namespace.
            "422": lambda: create_batch([ITEM], key),
            "429": lambda: create_batch([ITEM], auth=QUOTA_AUTH),
        },
        "resumeBatch": {
            "200": lambda: requests.get(f"{BASE}/v1/batches/{done_batch}/resume?cursor=1", headers=watches_done, timeout=10),
            "400": lambda: get(f"/v1/batches/{'b' * 256}/resume?cursor=0"),
            "401": lambda: requests.get(f"{BASE}/v1/batches/{done_batch}/resume?cursor=0", timeout=10),
            "403": lambda: requests.get(f"{BASE}/v1/batches/{done_batch}/resume?cursor=0", headers=cancels_done, timeout=10),
            # Another batch than its token's claim, as if it did not exist.
            "404": lambda: requests.get(f"{BASE}/v1/batches/{live_batch}/resume?cursor=0", headers=watches_done, timeout=10),
            "503": lambda: watch_limit(lambda _: f"/v1/batches/{live_batch}/resume?cursor={live_cursor}&waitMs=5000"),
            "429": lambda: watch_quota(quota_task, lambda _: f"/v1/batches/{quota_batch}/resume?cursor=1&waitMs=5000"),
        },
        "streamBatchEvents": {
            # A native EventSource's way in: the batch token in the URL.
            "200": lambda: requests.get(f"{BASE}/v1/batches/{done_batch}/events?cursor=0&access_token={watches_done['authorization'][7:]}", timeout=10),
            "204": lambda: get(f"/v1/batches/{done_batch}/events", headers={"last-event-id": str(done_cursor)}),
            "400": lambda: get(f"/v1/batches/{done_batch}/events", headers={"last-event-id": "x"}),
            "401": lambda: requests.get(f"{BASE}/v1/batches/{done_batch}/events", timeout=10),
            "403": lambda: requests.get(f"{BASE}/v1/batches/{done_batch}/events", headers=cancels_done, timeout=10),
            "404": lambda: get("/v1/batches/no-such-batch/events"),
            "503": lambda: watch_limit(lambda _: f"/v1/batches/{live_batch}/events?cursor={live_cursor}"),
            "429": lambda: watch_quota(quota_task, lambda _: f"/v1/batches/{quota_batch}/events"),
        },
        "executorCallback": {
            "200": lambda: callback(running, {"type": "progress", "atMs": 4, "progress": 20, "cursor": "c"}),
            "400": lambda: callback(running, {"type": "progress", "atMs": 4, "progress": 101, "cursor": "c"}),
            "401": lambda: requests.post(f"{BASE}/v1/tasks/{running}/callbacks", json={"taskId": running, **START}, timeout=10),
            "408": lambda: raw_partial(f"/v1/tasks/{running}/callbacks", cb_headers(running, b"{")),
            "413": lambda: callback(running, None, body=json.dumps({"taskId": running, **START, "worker": "w" * 70_000}).encode()),
            "422": lambda: callback(other, {"type": "progress", "atMs": 3, "progress": 9, "cursor": "c"}, used),
        },
        "claimWork": {
            "200": lambda: claimed_one(claim({"worker": "openapi", "kinds": [claim_kind, idle_kind], "max": 2, "leaseMs": 60_000})),
            "400": lambda: claim({**idle, "max": 101}),
            "401": lambda: requests.post(f"{BASE}/v1/work/claim", json=idle, headers=AUTH, timeout=10),
            "408": lambda: raw_partial("/v1/work/claim", {k: v for k, v in claim_headers(b"{").items() if k != "content-type"}),
            "409": lambda: claim(raw=replayed, headers=replayed_headers),
            "413": lambda: claim({**idle, "worker": "w" * 70_000}),
            # A claim that finds no work and would be held is a held watch.
            "429": lambda: watch_quota(quota_task, None, send=lambda _: claim({**idle, "waitMs": 5000}, tenant=QUOTA_TENANT, signer=quota_sign)),
            "503": lambda: watch_limit(None, send=lambda _: claim({**idle, "waitMs": 5000})),
        },
        "deliverResult": {
            "201": lambda: post(f"/v1/tasks/{done}/deliveries", headers={"idempotency-key": f"d_{uuid.uuid4().hex}"}),
            "200": lambda: post(f"/v1/tasks/{done}/deliveries", headers={"idempotency-key": delivered}),
            "400": lambda: post(f"/v1/tasks/{done}/deliveries"),
            "401": lambda: requests.post(f"{BASE}/v1/tasks/{done}/deliveries", headers={"idempotency-key": "k"}, timeout=10),
            "403": lambda: post(f"/v1/tasks/{done}/deliveries", headers={**watch_only, "idempotency-key": "k"}),
            "404": lambda: post("/v1/tasks/no-such-task/deliveries", headers={"idempotency-key": "k"}),
            "409": lambda: post(f"/v1/tasks/{running}/deliveries", headers={"idempotency-key": f"d_{uuid.uuid4().hex}"}),
            "413": lambda: post(f"/v1/tasks/{done}/deliveries", headers={"idempotency-key": "k"}, data="x" * 70_000),
            "422": lambda: post(f"/v1/tasks/{running}/deliveries", headers={"idempotency-key": delivered}),
        },
        "cancelTask": {
            "200": lambda: post(f"/v1/tasks/{running}/cancel", json={"reason": "changed my mind"}),
            "400": lambda: post(f"/v1/tasks/{running}/cancel", json={"type": "cancel"}),
            "401": lambda: requests.post(f"{BASE}/v1/tasks/{running}/cancel", timeout=10),
            "403": lambda: post(f"/v1/tasks/{running}/cancel", headers=watch_only),
            "404": lambda: post("/v1/tasks/no-such-task/cancel"),
            "408": lambda: raw_partial(f"/v1/tasks/{running}/cancel", AUTH),
            "413": lambda: post(f"/v1/tasks/{running}/cancel", data=big, headers={"content-type": "application/json"}),
        },
        "cancelBatch": {
            "200": lambda: post(f"/v1/batches/{to_cancel}/cancel", json={"reason": "the rest is not needed"}),
            "400": lambda: post(f"/v1/batches/{to_cancel}/cancel", json={"atMs": 1}),
            "401": lambda: requests.post(f"{BASE}/v1/batches/{to_cancel}/cancel", timeout=10),
            "403": lambda: post(f"/v1/batches/{done_batch}/cancel", headers=watches_done),
            "404": lambda: post("/v1/batches/no-such-batch/cancel"),
            "408": lambda: raw_partial(f"/v1/batches/{done_batch}/cancel", AUTH),
            "413": lambda: post(f"/v1/batches/{done_batch}/cancel", data=big, headers={"content-type": "application/json"}),
        },
        "decideTask": {
            "200": lambda: post(f"/v1/tasks/{done}/decisions", json={"decision": "approve", "artifactHash": "sha256:a", "version": 2}),
            "400": lambda: post(f"/v1/tasks/{done}/decisions", json={"decision": "maybe", "artifactHash": "sha256:a", "version": 2}),
            "401": lambda: requests.post(f"{BASE}/v1/tasks/{done}/decisions", json={}, timeout=10),
            "403": lambda: post(f"/v1/tasks/{done}/decisions", json={"decision": "approve", "artifactHash": "sha256:a", "version": 2}, headers=watch_only),
            "404": lambda: post("/v1/tasks/no-such-task/decisions", json={"decision": "approve", "artifactHash": "a", "version": 1}),
            "408": lambda: raw_partial(f"/v1/tasks/{done}/decisions", AUTH),
            "413": lambda: post(f"/v1/tasks/{done}/decisions", data=big, headers={"content-type": "application/json"}),
        },
        "appendOutput": {
            "200": lambda: append_output(running, {"attempt": 1, "offset": 0, "text": "Once"}),
            "400": lambda: append_output(running, {"attempt": 1, "offset": 0, "text": ""}),
            "401": lambda: requests.post(f"{BASE}/v1/tasks/{running}/output/draft", json={"taskId": running, "stream": "draft", "attempt": 1, "offset": 0, "text": "x"}, timeout=10),
            "408": lambda: raw_partial(f"/v1/tasks/{running}/output/draft", cb_headers(running, b"{")),
            "409": lambda: append_output(running, {"attempt": 1, "offset": 99, "text": "gap"}),
            "413": lambda: append_output(running, None, body=b" " * 500_000),
        },
        "listNotifications": {
            "200": lambda: get("/v1/notifications?after=0&limit=10"),
            "400": lambda: get("/v1/notifications?limit=1001"),
            "401": lambda: requests.get(f"{BASE}/v1/notifications", timeout=10),
            "403": lambda: get("/v1/notifications", headers=watch_only),
        },
    }


def document_errors():
    """The description against the OAS 3.1 meta-schema, its schemas against JSON Schema 2020-12."""
    from schemathesis.specs.openapi.definitions import OPENAPI_31

    errors = [f"docs/openapi.yaml is not valid OpenAPI 3.1: {e}" for e in jsonschema_rs.validator_for(OPENAPI_31).iter_errors(doc)]
    for name, schema in doc["components"]["schemas"].items():
        try:
            jsonschema_rs.meta.validate(schema)
        except jsonschema_rs.ValidationError as e:
            errors.append(f"components.schemas.{name} is not valid JSON Schema: {e}")
    return errors


def main():
    failures = document_errors()
    table = recipes()
    produced = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            op_id = op["operationId"]
            documented = op["responses"]
            mine = table.pop(op_id, {})
            for status in documented:
                if status not in mine:
                    if status not in NOT_PRODUCIBLE:
                        failures.append(f"{op_id}: documented status {status} is produced by no request here")
                    continue
                try:
                    res = mine.pop(status)()
                    assert res.status_code == int(status), f"{op_id}: expected {status}, got {res.status_code}: {res.text[:300]}"
                    check_answer(op_id, status, res, documented)
                    produced += 1
                except AssertionError as err:
                    failures.append(str(err))
            failures.extend(f"{op_id}: a request here produces {s}, which the description does not document" for s in mine)
    failures.extend(f"{op_id}: not an operation of the description" for op_id in table)
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    skipped = ", ".join(f"{s} ({why.split(' (')[0]})" for s, why in NOT_PRODUCIBLE.items())
    print(f"openapi statuses: {produced} documented statuses produced and validated; not producible on demand: {skipped}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
