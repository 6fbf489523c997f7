"""The fake external system of the fault tests (seed 001 §5): a SQLite file
shared by the test and every worker process, deduplicating writes by their
idempotency key. A write under a key seen before creates nothing and
answers the first resource's id; every write call is logged, so a test can
tell "written twice, created once" from "written once".
"""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path

# Set to False (locally, on purpose) to see the effect tests fail: the
# system then creates a resource per write, as one without a unique key.
DEDUP = True

SCHEMA = """
create table if not exists resources (
  seq integer primary key autoincrement,
  idempotency_key text not null,
  resource_id text not null,
  payload text not null
);
create unique index if not exists resources_key on resources(idempotency_key)
  where {dedup};
create table if not exists writes (
  seq integer primary key autoincrement,
  idempotency_key text not null,
  writer text not null
);
"""


def _open(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=10, isolation_level=None)
    db.executescript(SCHEMA.format(dedup="1" if DEDUP else "0"))
    return db


def write(path: Path, key: str, payload: str, writer: str) -> str:
    """Creates the resource for `key` once; answers its id every time."""
    db = _open(path)
    try:
        db.execute("begin immediate")
        db.execute("insert into writes(idempotency_key, writer) values (?, ?)", (key, writer))
        resource = f"RES-{secrets.token_hex(4)}"
        db.execute(
            "insert or ignore into resources(idempotency_key, resource_id, payload) "
            "values (?, ?, ?)",
            (key, resource, payload),
        )
        db.execute("commit")
        row = db.execute(
            "select resource_id from resources where idempotency_key = ? order by seq desc",
            (key,),
        ).fetchone()
        return str(row[0])
    finally:
        db.close()


def resources(path: Path) -> list[tuple[str, str, str]]:
    """Every resource created: (key, id, payload), oldest first."""
    db = _open(path)
    try:
        rows = db.execute(
            "select idempotency_key, resource_id, payload from resources order by seq"
        ).fetchall()
        return [(str(k), str(r), str(p)) for k, r, p in rows]
    finally:
        db.close()


def writes(path: Path) -> list[tuple[str, str]]:
    """Every write call made: (key, writer), oldest first."""
    db = _open(path)
    try:
        rows = db.execute("select idempotency_key, writer from writes order by seq").fetchall()
        return [(str(k), str(w)) for k, w in rows]
    finally:
        db.close()
