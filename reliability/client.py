"""A raw MCP 2026-07-28 client that judges every response it gets.

Each request ends as one `Outcome` kind:

- `ok` / `rpc_error`: a well-formed JSON-RPC answer (an error code other than -32603);
- `retryable`: HTTP 503 with JSON-RPC -31000 (Tether's documented "unavailable, retry");
- `expected_drop`: a transport error while the target process was killed or not yet ready;
- `violation`: anything else — a 5xx that is not -31000, -32603, a transport error or timeout
  from a live process, a body that is not JSON-RPC. Violations are kept with their evidence.
"""

from __future__ import annotations

import base64
import itertools
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from reliability.cluster import Proc

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
UNAVAILABLE = -31000
INTERNAL = -32603
TASK_STATUSES = frozenset({"working", "input_required", "completed", "failed", "cancelled"})
NAME_FIELDS = {"tools/call": "name", "tasks/get": "taskId", "tasks/update": "taskId"}
NAME_FIELDS["tasks/cancel"] = "taskId"


def meta(**extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {"form": {}},
            "extensions": {TASKS: {}},
        },
        "io.modelcontextprotocol/clientInfo": {"name": "tether-reliability", "version": "0"},
        **extra,
    }


def headers_for(method: str, params: dict[str, Any]) -> dict[str, str]:
    h = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": header_value(method),
    }
    name_field = NAME_FIELDS.get(method)
    if name_field and isinstance(params.get(name_field), str):
        h["Mcp-Name"] = header_value(params[name_field])
    return h


def header_value(text: str) -> str:
    """Printable ASCII as is; anything else in the SEP-2243 `=?base64?…?=` form."""
    if text.isascii() and text.isprintable() and text == text.strip():
        return text
    return "=?base64?" + base64.b64encode(text.encode("utf-8", "surrogatepass")).decode() + "?="


@dataclass
class Outcome:
    kind: str
    method: str
    server: str
    status: int | None = None
    body: dict[str, Any] | None = None
    detail: str = ""
    seconds: float = 0.0

    @property
    def result(self) -> dict[str, Any] | None:
        if self.kind == "ok" and self.body is not None:
            res = self.body.get("result")
            return res if isinstance(res, dict) else None
        return None

    @property
    def error_code(self) -> int | None:
        err = (self.body or {}).get("error")
        return err.get("code") if isinstance(err, dict) else None


@dataclass
class Ledger:
    """Counts of every outcome, per method, and the violations with their evidence."""

    counts: Counter[str] = field(default_factory=Counter)
    by_method: Counter[tuple[str, str]] = field(default_factory=Counter)
    status_5xx: Counter[int] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    max_latency: float = 0.0
    unexplained_503: int = 0  # 503/-31000 from a process that was up and ready

    def add(self, out: Outcome) -> None:
        self.counts[out.kind] += 1
        self.by_method[(out.method, out.kind)] += 1
        self.max_latency = max(self.max_latency, out.seconds)
        if out.status is not None and out.status >= 500:
            self.status_5xx[out.status] += 1
        if out.kind == "violation" and len(self.violations) < 200:
            self.violations.append(
                f"{out.method} @{out.server} status={out.status} {out.detail}"[:600]
            )

    @property
    def requests(self) -> int:
        return sum(self.counts.values())

    @property
    def unexpected_5xx(self) -> int:
        """5xx answers that are not Tether's retryable 503/-31000."""
        return sum(self.status_5xx.values()) - self.counts["retryable"]


class Client:
    """One keep-alive HTTP client for all servers; every response goes to the ledger."""

    def __init__(self, ledger: Ledger, *, timeout: float = 20.0) -> None:
        self.ledger = ledger
        self.timeout = timeout
        self.http = httpx.AsyncClient(
            timeout=timeout,
            limits=httpx.Limits(max_connections=400, max_keepalive_connections=200),
        )
        self._ids = itertools.count(1)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def call(
        self,
        proc: Proc,
        method: str,
        params: dict[str, Any],
        *,
        extra_headers: dict[str, str] | None = None,
    ) -> Outcome:
        p = dict(params)
        p.setdefault("_meta", meta())
        h = headers_for(method, p)
        h.update(extra_headers or {})
        body = orjson.dumps(
            {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": p}
        )
        return await self.send(proc, method, body, h)

    async def send(self, proc: Proc, method: str, body: bytes, headers: dict[str, str]) -> Outcome:
        t0 = time.monotonic()
        try:
            resp = await self.http.post(proc.url, content=body, headers=headers)
        except httpx.LocalProtocolError:
            raise  # the request could not be put on the wire: not the server's doing
        except httpx.TimeoutException as exc:
            t1 = time.monotonic()
            kind = "expected_drop" if proc.was_down(t0, t1) else "violation"
            out = Outcome(kind, method, proc.label, detail=f"timeout {type(exc).__name__}")
        except httpx.TransportError as exc:
            t1 = time.monotonic()
            kind = "expected_drop" if proc.was_down(t0, t1) else "violation"
            out = Outcome(kind, method, proc.label, detail=f"transport {type(exc).__name__}")
        else:
            t1 = time.monotonic()
            out = judge(method, proc.label, resp)
        out.seconds = t1 - t0
        if out.kind == "retryable" and not proc.was_down(t0, t1):
            self.ledger.unexplained_503 += (
                1  # the process was up: only a database issue explains it
            )
        self.ledger.add(out)
        return out


def judge(method: str, server: str, resp: httpx.Response) -> Outcome:
    status = resp.status_code
    parsed: Any = None
    if resp.content:
        try:
            parsed = orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            parsed = None
    body = parsed if isinstance(parsed, dict) else None
    err = body.get("error") if body else None
    code = err.get("code") if isinstance(err, dict) else None
    if status >= 500:
        if status == 503 and code == UNAVAILABLE:
            return Outcome("retryable", method, server, status, body)
        return Outcome("violation", method, server, status, body, f"5xx {resp.text[:300]}")
    if code == INTERNAL:
        return Outcome("violation", method, server, status, body, f"-32603 {resp.text[:300]}")
    if body is None or ("result" not in body and "error" not in body):
        # Transport-level refusals (405/413/415/403 without a JSON-RPC body) are not JSON-RPC.
        if 400 <= status < 500 or status == 202:
            return Outcome("refused", method, server, status, body)
        return Outcome("violation", method, server, status, body, f"not JSON-RPC {resp.text[:200]}")
    if err is not None:
        return Outcome("rpc_error", method, server, status, body)
    return Outcome("ok", method, server, status, body)


def task_problem(task_id: str, result: dict[str, Any] | None) -> str | None:
    """Why a tasks/get result is not a valid task for `task_id` (None when it is)."""
    if result is None:
        return "no result"
    if result.get("taskId") != task_id:
        return f"taskId {result.get('taskId')!r} != {task_id!r}"
    status = result.get("status")
    if status not in TASK_STATUSES:
        return f"status {status!r}"
    if not isinstance(result.get("createdAt"), str):
        return "createdAt missing"
    if status == "input_required" and not isinstance(result.get("inputRequests"), dict):
        return "input_required without inputRequests"
    if status == "completed" and not isinstance(result.get("result"), dict):
        return "completed without result"
    return None
