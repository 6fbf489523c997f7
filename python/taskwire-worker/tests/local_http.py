"""Two small loopback HTTP/1.1 peers the tests put around the real server.

- `Vendor`: a vendor API with "submit once, query many" jobs, deduplicated
  by `Idempotency-Key`, whose submit can be made to answer too late.
- `CuttingProxy`: forwards to the taskwire server and, for the next N
  reports, drops the server's answer and closes the connection: the report
  was applied, but the worker never learns it. Or it answers everything
  503 (the server unreachable).

One request per connection (`Connection: close`), which keeps both simple.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any


async def read_message(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, str], bytes]:
    """A request or response: its first line, headers (lower-case), body."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return lines[0].encode(), headers, body


def response(status: int, body: Any) -> bytes:
    payload = json.dumps(body).encode()
    return (
        f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n"
    ).encode() + payload


@dataclass
class Vendor:
    """Jobs are done after `polls_to_finish` polls."""

    submit_delay_s: float = 0.0
    polls_to_finish: int = 2
    submits: list[str] = field(default_factory=list)
    jobs: dict[str, int] = field(default_factory=dict)  # key -> polls so far
    url: str = ""
    _server: asyncio.Server | None = None

    async def start(self) -> Vendor:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line, headers, _ = await read_message(reader)
            method, path, _ = line.decode().split(" ", 2)
            writer.write(await self._route(method, path, headers))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # a peer gone, or the test's loop closing: nothing to answer
        finally:
            writer.close()

    async def _route(self, method: str, path: str, headers: dict[str, str]) -> bytes:
        if method == "POST" and path == "/jobs":
            key = headers["idempotency-key"]
            self.submits.append(key)
            self.jobs.setdefault(key, 0)
            # Created, then answered too late for the client: its outcome
            # is unknown to the caller.
            await asyncio.sleep(self.submit_delay_s)
            return response(202, {"id": key})
        if method == "GET" and path.startswith("/lookup/"):
            key = path.removeprefix("/lookup/")
            return response(200, {"id": key}) if key in self.jobs else response(404, {})
        if method == "GET" and path.startswith("/jobs/"):
            key = path.removeprefix("/jobs/")
            self.jobs[key] += 1
            done = self.jobs[key] >= self.polls_to_finish
            return response(200, {"status": "done" if done else "running", "result": "r-" + key})
        return response(404, {})


@dataclass
class CuttingProxy:
    upstream: str  # host:port
    cut_reports: int = 0
    unreachable: bool = False  # answer everything 503 without forwarding it
    reports: list[tuple[str, bytes]] = field(default_factory=list)  # (webhook-id, body)
    url: str = ""
    _server: asyncio.Server | None = None

    async def start(self) -> CuttingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line, headers, body = await read_message(reader)
            is_report = line.startswith(b"POST ") and b"/callbacks " in line
            if is_report:
                self.reports.append((headers.get("webhook-id", ""), body))
            if self.unreachable:
                writer.write(
                    b"HTTP/1.1 503 X\r\nretry-after: 0\r\ncontent-length: 0\r\n"
                    b"connection: close\r\n\r\n"
                )
                await writer.drain()
                return
            host, port = self.upstream.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            head = [line.decode("latin-1")]
            head += [f"{k}: {v}" for k, v in headers.items() if k != "connection"]
            head.append("connection: close")
            up_writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            await up_writer.drain()
            answer = await read_message(up_reader)
            up_writer.close()
            if is_report and self.cut_reports > 0:
                self.cut_reports -= 1
                return  # applied upstream; the answer is lost
            status, resp_headers, resp_body = answer
            out = [status.decode("latin-1")]
            out += [f"{k}: {v}" for k, v in resp_headers.items() if k != "connection"]
            out.append("connection: close")
            writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + resp_body)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # a peer gone, or the test's loop closing: nothing to answer
        finally:
            writer.close()
