"""The requests statuses.py makes, as the parties of PROTOCOL.md make them:
the tenant's backend (creates, tasks and batches in given states), its
executor (signed callbacks), the quota tenant, an application minting
browser tokens, and a client whose body stops short or who holds watches.

The environment is statuses.py's (see its docstring): TASKWIRE_BASE_URL,
TASKWIRE_TOKEN, TASKWIRE_QUOTA_TOKEN, TASKWIRE_QUOTA_SECRET and
TASKWIRE_BROWSER_KEY; the server runs with `--max-watchers 4`.
"""

import base64
import hashlib
import hmac
import json
import os
import socket
import threading
import time
import uuid
from urllib.parse import urlsplit

import requests

from hooks import sign  # the same signing as the fuzzing run

BASE = os.environ["TASKWIRE_BASE_URL"]
TOKEN = os.environ["TASKWIRE_TOKEN"]
AUTH = {"authorization": f"Bearer {TOKEN}"}
MAX_WATCHERS = 4


def callback(task_id, event, callback_id=None, body=None, signer=sign):
    raw = body if body is not None else json.dumps({"taskId": task_id, **event}).encode()
    cid = callback_id or f"cb_{uuid.uuid4().hex}"
    ts = str(int(time.time()))
    headers = {"content-type": "application/json", "webhook-id": cid, "webhook-timestamp": ts, "webhook-signature": signer(cid, ts, raw)}
    return requests.post(f"{BASE}/v1/tasks/{task_id}/callbacks", data=raw, headers=headers, timeout=10)


def append_output(task_id, chunk, stream="draft", body=None, signer=sign):
    """An executor's output append (PROTOCOL.md §Live output), signed as a callback is."""
    raw = body if body is not None else json.dumps({"taskId": task_id, "stream": stream, **chunk}).encode()
    cid = f"out_{uuid.uuid4().hex}"
    ts = str(int(time.time()))
    headers = {"content-type": "application/json", "webhook-id": cid, "webhook-timestamp": ts, "webhook-signature": signer(cid, ts, raw)}
    return requests.post(f"{BASE}/v1/tasks/{task_id}/output/{stream}", data=raw, headers=headers, timeout=10)


TENANT = os.environ.get("TASKWIRE_TENANT", "tenant-a")


def claim_headers(raw, claim_id=None, tenant=TENANT, signer=sign):
    """A worker's claim headers, signed over `raw` as a callback is, naming `tenant`."""
    cid = claim_id or f"clm_{uuid.uuid4().hex}"
    ts = str(int(time.time()))
    return {"content-type": "application/json", "webhook-id": cid, "webhook-timestamp": ts, "webhook-signature": signer(cid, ts, raw), "taskwire-tenant": tenant}


def claim(body=None, raw=None, headers=None, tenant=TENANT, signer=sign):
    """A worker's claim (PROTOCOL.md §Workers), signed with the tenant's callback secret."""
    raw = raw if raw is not None else json.dumps(body).encode()
    headers = headers or claim_headers(raw, tenant=tenant, signer=signer)
    return requests.post(f"{BASE}/v1/work/claim", data=raw, headers=headers, timeout=10)


def create(body=None, key=None):
    headers = {**AUTH, **({"idempotency-key": key} if key else {})}
    return requests.post(f"{BASE}/v1/tasks", json=body or {"ttlMs": 3_600_000, "maxAttempts": 2}, headers=headers, timeout=10)


START = {"type": "start", "atMs": 1, "worker": "w"}
SUCCEED = {"type": "succeed", "atMs": 2, "resultRef": "blob://r", "resultHash": "sha256:r"}


def task(*events):
    tid = create().json()["id"]
    for event in events:
        assert callback(tid, event).status_code == 200
    return tid


def create_batch(items, key=None, auth=None, data=None):
    headers = {**(AUTH if auth is None else auth), **({"idempotency-key": key} if key else {})}
    if data is not None:
        headers["content-type"] = "application/json"
        return requests.post(f"{BASE}/v1/batches", data=data, headers=headers, timeout=10)
    return requests.post(f"{BASE}/v1/batches", json={"items": items}, headers=headers, timeout=10)


ITEM = {"ttlMs": 3_600_000, "maxAttempts": 2, "kind": "openapi", "input": {"n": 1}}


def batch(*item_events):
    """A batch with one item per argument, each item given those callbacks:
    its id, its task ids and its cursor after them."""
    res = create_batch([ITEM] * len(item_events))
    assert res.status_code == 201, res.text[:300]
    body = res.json()
    tasks = [t["id"] for t in body["tasks"]]
    for tid, events in zip(tasks, item_events):
        for event in events:
            assert callback(tid, event).status_code == 200
    cursor = requests.get(f"{BASE}/v1/batches/{body['batchId']}/resume?cursor=0", headers=AUTH, timeout=10).json()["cursor"]
    return body["batchId"], tasks, cursor


def raw_partial(path, headers, declared=100, sent=b"{"):
    """A request whose body stops short: the answer the server gives after its body timeout."""
    url = urlsplit(BASE)
    with socket.create_connection((url.hostname, url.port), timeout=5) as s:
        head = f"POST {path} HTTP/1.1\r\nhost: {url.netloc}\r\ncontent-length: {declared}\r\ncontent-type: application/json\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        s.sendall(head.encode() + sent)
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < int(_header(data, "content-length") or 0):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    res = requests.models.Response()
    res.status_code = int(lines[0].split()[1])
    res.headers = requests.structures.CaseInsensitiveDict(line.split(": ", 1) for line in lines[1:])
    res._content = body
    return res


def _header(data, name):
    for line in data.split(b"\r\n\r\n", 1)[0].decode(errors="replace").split("\r\n")[1:]:
        k, _, v = line.partition(": ")
        if k.lower() == name:
            return v
    return None


def watch_limit(path_of, send=None):
    """Fills the held-watch cap with long-polls, then asks once more (a GET
    of `path_of(live)`, or `send(live)`): 503."""
    live = task(START)
    held = [threading.Thread(target=requests.get, args=(f"{BASE}/v1/tasks/{live}/resume?cursor=1&waitMs=10000",), kwargs={"headers": AUTH, "timeout": 15}) for _ in range(MAX_WATCHERS)]
    for t in held:
        t.start()
    time.sleep(0.5)
    try:
        return send(live) if send else requests.get(f"{BASE}{path_of(live)}", headers=AUTH, timeout=10)
    finally:
        assert callback(live, {"type": "progress", "atMs": 3, "progress": 5, "cursor": "c"}).status_code == 200
        for t in held:
            t.join()


QUOTA_TENANT = os.environ.get("TASKWIRE_QUOTA_TENANT", "tenant-q")
QUOTA_AUTH = {"authorization": f"Bearer {os.environ['TASKWIRE_QUOTA_TOKEN']}"}
QUOTA_KEY = base64.b64decode(os.environ["TASKWIRE_QUOTA_SECRET"].removeprefix("whsec_"))


def quota_sign(callback_id, timestamp, body):
    """The quota tenant's callbacks are signed with its own secret."""
    mac = hmac.new(QUOTA_KEY, f"{callback_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def watch_quota(live, path_of, send=None):
    """Holds the quota tenant's one watch on its task `live`, then asks once
    more (a GET of `path_of(version)`, or `send(version)`): 429."""
    version = requests.get(f"{BASE}/v1/tasks/{live}", headers=QUOTA_AUTH, timeout=10).json()["version"]
    held = threading.Thread(target=requests.get, args=(f"{BASE}/v1/tasks/{live}/resume?cursor={version}&waitMs=10000",), kwargs={"headers": QUOTA_AUTH, "timeout": 15})
    held.start()
    time.sleep(0.5)
    try:
        return send(version) if send else requests.get(f"{BASE}{path_of(version)}", headers=QUOTA_AUTH, timeout=10)
    finally:
        wake = {"type": "progress", "atMs": 3 + version, "progress": version, "cursor": f"c{version}"}
        assert callback(live, wake, signer=quota_sign).status_code == 200
        held.join()


def browser_token(tasks, rights, batch=None):
    """A browser token for `tasks` (or a `batch`) with `rights`, minted as an
    application's backend would (PROTOCOL.md §Credentials): HS256 with key
    `k1`."""

    def b64url(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    key = base64.b64decode(os.environ["TASKWIRE_BROWSER_KEY"])
    header = {"alg": "HS256", "typ": "JWT", "kid": "k1"}
    claims = {"sub": "openapi", "aud": "taskwire", "exp": int(time.time()) + 600, "rights": rights}
    claims.update({"tasks": tasks} if tasks else {})
    claims.update({"batch": batch} if batch else {})
    signing = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    signature = hmac.new(key, signing.encode(), hashlib.sha256).digest()
    return f"{signing}.{b64url(signature)}"
