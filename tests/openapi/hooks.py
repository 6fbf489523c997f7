"""Schemathesis hooks for the taskwire reference server (tests/openapi/).

Loaded with SCHEMATHESIS_HOOKS=tests/openapi/hooks.py. The environment
says where the server is and how to act as its tenant and its executor:
TASKWIRE_BASE_URL, TASKWIRE_TOKEN, TASKWIRE_CALLBACK_SECRET and
TASKWIRE_TENANT (the tenant the token and the secret are of).

Without help, fuzzing would only ever meet unknown tasks (404) and
unsigned callbacks (401). So before each call:

- a task id in the path is, most of the time, one of a pool of real tasks
  in every state, created at start (`/events` gets a terminal one or an
  unknown id: a stream on a live task stays open, and fuzzing reads whole
  bodies);
- a batch id in the path likewise (but a batch cancel gets a new batch
  of its own each time): a pool of real batches, live ones (an
  item queued, an item running; callbacks go to those items too, so that
  fuzzed events move a batch cursor) and ones whose every item is
  terminal, the only ones `/events` gets (so the stream ends). A task or
  batch the run itself created (then passed on by a link of the stateful
  phase) is live: its `/events` gets a terminal one instead. Half the time a
  valid `cursor` (or `Last-Event-ID`) on a pool batch is aimed at or
  below the batch's own, so that deltas, caught-up answers and 204s are
  met, not only snapshots;
- a callback whose headers were generated as valid is signed: the body
  names the path's task (`taskId`), is serialized once, and the signature
  covers exactly those bytes, with a fresh timestamp. An event that
  carries `attempt` is dated now: more than 5 minutes from the server's
  clock is `clock-skew` (PROTOCOL.md §Workers › Reports), which no schema
  can say;
- a worker's claim whose headers were generated as valid is signed the
  same way, for the run's tenant (`taskwire-tenant`, TASKWIRE_TENANT);
- `waitMs` (a long-poll's query, a claim's body) is at most 50 ms, so that
  long-polls and held claims do not eat the time budget;
- the `access_token` query (the other way to authenticate) is left out:
  the run sends the tenant token's header, and both at once is a 400.

Negative cases (schemathesis marks what it made invalid) are left as
generated: an invalid header stays invalid and must be refused.
"""

import base64
import hashlib
import hmac
import json
import os
import random
import time
import uuid

import requests
import schemathesis
from schemathesis.core.parameters import ParameterLocation

BASE = os.environ["TASKWIRE_BASE_URL"]
TOKEN = os.environ["TASKWIRE_TOKEN"]
SECRET = os.environ["TASKWIRE_CALLBACK_SECRET"]
KEY = base64.b64decode(SECRET.removeprefix("whsec_"))
TENANT = os.environ.get("TASKWIRE_TENANT", "tenant-a")
MAX_WAIT_MS = 50

_rng = random.Random(int(os.environ.get("TASKWIRE_SEED", "13")))
_pool: dict[str, list[str]] = {}
# Tasks and batches the run itself created (createTask, createBatch):
# live, so never streamed.
_created: set[str] = set()


def _api(method, path, **kwargs):
    headers = {"authorization": f"Bearer {TOKEN}", **kwargs.pop("headers", {})}
    res = requests.request(method, f"{BASE}{path}", headers=headers, timeout=10, **kwargs)
    res.raise_for_status()
    return res.json()


def sign(callback_id: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(KEY, f"{callback_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def _callback(task_id: str, event: dict) -> None:
    body = json.dumps({"taskId": task_id, **event}).encode()
    cid, ts = f"cb_{uuid.uuid4().hex}", str(int(time.time()))
    headers = {"webhook-id": cid, "webhook-timestamp": ts, "webhook-signature": sign(cid, ts, body)}
    res = requests.post(f"{BASE}/v1/tasks/{task_id}/callbacks", data=body, headers=headers, timeout=10)
    res.raise_for_status()


def _task(*events: dict) -> str:
    task = _api("POST", "/v1/tasks", json={"ttlMs": 3_600_000, "maxAttempts": 2, "kind": "fuzz", "input": {"n": 1}})
    for event in events:
        _callback(task["id"], event)
    return task["id"]


def _batch(*item_events: tuple[dict, ...]) -> tuple[str, list[str]]:
    """A batch with one item per argument, each given those callbacks: its id and its items."""
    item = {"ttlMs": 3_600_000, "maxAttempts": 2, "kind": "fuzz", "input": {"n": 1}}
    batch = _api("POST", "/v1/batches", json={"items": [item] * len(item_events)})
    tasks = [t["id"] for t in batch["tasks"]]
    for task_id, events in zip(tasks, item_events):
        for event in events:
            _callback(task_id, event)
    return batch["batchId"], tasks


def pool() -> dict[str, list[str]]:
    """Real tasks by liveness, made once: queued, running, and each terminal
    state; and real batches, live or with every item terminal."""
    if not _pool:
        start = {"type": "start", "atMs": 1, "worker": "w"}
        succeed = {"type": "succeed", "atMs": 3, "resultRef": "blob://r", "resultHash": "sha256:r"}
        fail = {"type": "fail", "atMs": 3, "error": "e", "retryable": False}
        expire = {"type": "expire", "atMs": 3}
        _pool["live"] = [_task(), _task(start), _task(start, {"type": "progress", "atMs": 2, "progress": 30, "cursor": "c"})]
        _pool["terminal"] = [_task(start, succeed), _task(start, fail), _task(expire)]
        live_batch, _pool["live_items"] = _batch((), (start,))
        _pool["live_batches"] = [live_batch, _batch((), (), ())[0]]
        _pool["terminal_batches"] = [_batch((start, succeed), (start, fail), (expire,))[0], _batch((expire,))[0]]
    return _pool


def _operation(case) -> tuple[str, str]:
    return case.operation.method.upper(), case.operation.path


def negative_at(case, location) -> bool:
    """Whether schemathesis made `location` invalid on purpose (any phase)."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_negative:
        return False
    return meta.is_negative_at(location) or getattr(meta.phase.data, "parameter_location", None) == location


@schemathesis.hook
def before_call(context, case, **kwargs):
    method, path = _operation(case)
    negative_path = negative_at(case, ParameterLocation.PATH)
    kinds = ("terminal_batches", "live_batches") if path.startswith("/v1/batches/") else ("terminal", "live")
    terminal, live = (pool()[k] for k in kinds)
    if (method, path) == ("POST", "/v1/batches/{id}/cancel") and not negative_path:
        # A batch of its own each time: cancelling a pool batch would end
        # the live ones the other operations need. (A link of the stateful
        # phase may also carry an item's id here, which is no batch.)
        case.path_parameters = {**case.path_parameters, "id": _batch((), ())[0]}
    elif "{id}" in path and not negative_path and _rng.random() < 0.8:
        choices = terminal if path.endswith("/events") else live + terminal
        if path.endswith("/callbacks"):
            choices = choices + pool()["live_items"]
        case.path_parameters = {**case.path_parameters, "id": _rng.choice(choices)}
    # A stream on a live task or batch stays open: a terminal one instead.
    if path.endswith("/events") and case.path_parameters.get("id") in {*live, *_created}:
        case.path_parameters = {**case.path_parameters, "id": _rng.choice(terminal)}
    if path.startswith("/v1/batches/") and case.path_parameters.get("id") in live + terminal and _rng.random() < 0.5:
        _aim_cursor(case, path)
    if isinstance(case.query, dict) and isinstance(case.query.get("waitMs"), int) and case.query["waitMs"] > MAX_WAIT_MS:
        case.query = {**case.query, "waitMs": MAX_WAIT_MS}
    # The run authenticates with the tenant token's header. `access_token`
    # is the other way in (a browser token, for a native EventSource), and
    # sending both is refused (400) by design, so it is left out here;
    # statuses.py and the conformance suite test it.
    if isinstance(case.query, dict) and "access_token" in case.query:
        case.query = {k: v for k, v in case.query.items() if k != "access_token"}
    if method == "POST" and path.endswith("/callbacks"):
        _sign_callback(case)
    if (method, path) == ("POST", "/v1/work/claim"):
        _sign_claim(case)
    if (method, path) == ("POST", "/v1/tasks/{id}/output/{stream}"):
        _sign_output(case)


def _aim_cursor(case, path):
    """A cursor from 1 to the batch's own (a delta, or caught-up / 204 at it)."""
    batch_id = case.path_parameters["id"]
    cursor = _rng.randint(1, _api("GET", f"/v1/batches/{batch_id}/resume?cursor=0")["cursor"])
    if path.endswith("/resume") and isinstance(case.query, dict) and not negative_at(case, ParameterLocation.QUERY):
        case.query = {**case.query, "cursor": cursor}
    if path.endswith("/events") and not negative_at(case, ParameterLocation.HEADER):
        headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "last-event-id"}
        case.headers = {**headers, "Last-Event-ID": str(cursor)}


@schemathesis.hook
def after_call(context, case, response):
    operation = _operation(case)
    if operation in (("POST", "/v1/tasks"), ("POST", "/v1/batches")) and response.status_code in (200, 201):
        try:
            body = response.json()
            _created.update([body["batchId"], *(t["id"] for t in body["tasks"])] if "tasks" in body else [body["id"]])
        except (ValueError, KeyError, TypeError):
            pass  # not a task or batch: the response checks report it


def _sign_callback(case):
    if negative_at(case, ParameterLocation.HEADER):
        return
    body = case.body
    # The body names the path's task, so that the event itself is judged.
    # A negative body keeps its own `taskId` when it has one (that may be
    # what was made invalid); schemathesis revalidates what a hook changed.
    negative_body = negative_at(case, ParameterLocation.BODY)
    if isinstance(body, dict) and (not negative_body or "taskId" not in body):
        body = {**body, "taskId": case.path_parameters.get("id")}
    # A report of an attempt is dated on the server's clock, give or take
    # 5 minutes; a negative body keeps its own (it may be the invalid part).
    if isinstance(body, dict) and not negative_body and body.get("attempt") is not None:
        body = {**body, "atMs": int(time.time() * 1000)}
    _sign(case, dict(case.headers or {}), body)


def _sign_output(case):
    """An output append signed as the run's executor, its body naming the
    path's task and stream (unless that is what a negative body broke)."""
    if negative_at(case, ParameterLocation.HEADER):
        return
    body = case.body
    if isinstance(body, dict) and not negative_at(case, ParameterLocation.BODY):
        body = {**body, "taskId": case.path_parameters.get("id"), "stream": case.path_parameters.get("stream")}
    _sign(case, dict(case.headers or {}), body)


def _sign_claim(case):
    wait = case.body.get("waitMs") if isinstance(case.body, dict) else None
    # Only a valid hold is shortened: an invalid one stays invalid.
    if type(wait) is int and MAX_WAIT_MS < wait <= 30_000:
        case.body = {**case.body, "waitMs": MAX_WAIT_MS}
    if not negative_at(case, ParameterLocation.HEADER):
        _sign(case, {**(case.headers or {}), "taskwire-tenant": TENANT}, case.body)


def _sign(case, headers, body):
    """Signs `body` as the run's tenant (Standard Webhooks, as its executor
    and its workers do) under the generated `webhook-id`, with a fresh
    timestamp; leaves the case as it was when that cannot be done."""
    callback_id = headers.get("webhook-id")
    if not isinstance(callback_id, str):
        return
    try:
        # Exactly the bytes requests will send for this body (the transport
        # passes it as `json=`: `json.dumps(body, allow_nan=False)`, UTF-8).
        raw = body if isinstance(body, bytes) else json.dumps(body, allow_nan=False).encode()
        timestamp = str(int(time.time()))
        signature = sign(callback_id, timestamp, raw)
        callback_id.encode("latin-1")
    except (TypeError, ValueError, UnicodeEncodeError):
        return
    headers["webhook-timestamp"] = timestamp
    headers["webhook-signature"] = signature
    if body is not case.body:
        case.body = body
    case.headers = headers
