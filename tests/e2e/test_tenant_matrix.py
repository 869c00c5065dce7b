"""The tenant matrix: every MCP method and tool that touches a run, by the caller's
tenant, over real HTTP against real PostgreSQL.

Callers: `own` (an operator bound to the run's tenant), `other` (an operator bound to another
tenant), `none` (an operator bound to no tenant: it sees only the runs with no tenant), `admin`
(an admin bound to no tenant: it sees every tenant). `own` and `admin` are served; `other` and
`none` are refused, and a refusal is byte-for-byte the answer for an id that does not exist
(no existence oracle) and changes no table.

The surfaces come from the server's own catalog: every tool in tools/list that takes a `handle`,
every `tether://runs/…` resource template, and the tasks/* methods; tools that take no handle
start runs, and the run must belong to the caller's tenant. A new tool is in the matrix without
touching this file (one with a required argument the samples below do not know fails loudly).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import orjson
import pytest

from tests.apps.tenancy import app
from tests.e2e.conftest import ServeFn
from tests.mcp_client import McpClient
from tether.jsonrpc import codes
from tether.runtime.ids import new_execution_id
from tether.security import new_token

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

TENANT = "acme"
#: Who calls, the tenant its token is bound to, its role, and whether it reaches an acme run.
CALLERS: dict[str, tuple[str | None, str, bool]] = {
    "own": (TENANT, "operator", True),
    "other": ("globex", "operator", False),
    "none": (None, "operator", False),
    "admin": (None, "admin", True),
}
#: An argument value per argument name, for the handle-taking tools (besides `handle`).
SAMPLES: dict[str, Any] = {
    "wait": "go",
    "response": {"decision": "approve"},
    "name": "nudge",
    "payload": {"n": 1},
    "input": {"text": "hi"},
    "timeout_seconds": 1,
}
TABLES = ("history", "signals", "updates", "steps")

Surface = tuple[str, str]  # (method, tool name or URI template)


def _headers(tokens: dict[str, str], caller: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens[caller]}"}


def _tool_args(tool: dict[str, Any], run_id: str) -> dict[str, Any]:
    schema = tool["inputSchema"]
    args: dict[str, Any] = {"handle": run_id}
    for name in schema.get("properties", {}):
        if name in SAMPLES:
            args[name] = SAMPLES[name]
    unknown = set(schema.get("required", [])) - set(args)
    if unknown:
        pytest.fail(f"tool {tool['name']}: add a sample for required arguments {unknown}")
    return args


def _request(
    surface: Surface, tools: dict[str, dict[str, Any]], run_id: str, wait_key: str
) -> tuple[str, dict[str, Any]]:
    method, target = surface
    if method == "tools/call":
        return method, {"name": target, "arguments": _tool_args(tools[target], run_id)}
    if method == "resources/read":
        return method, {"uri": target.replace("{id}", run_id)}
    params: dict[str, Any] = {"taskId": run_id}
    if method == "tasks/update":
        answer = {"action": "accept", "content": SAMPLES["response"]}
        params["inputResponses"] = {wait_key: answer}
    return method, params


async def _snapshot(db: asyncpg.Pool) -> tuple[Any, ...]:
    runs = await db.fetch(
        "SELECT id, version, status, last_event_id, tenant, waits FROM executions ORDER BY id"
    )
    counts = [await db.fetchval(f"SELECT count(*) FROM {t}") for t in TABLES]
    return tuple(tuple(r) for r in runs), tuple(counts)


def _served(body: dict[str, Any]) -> bool:
    result = body.get("result")
    return isinstance(result, dict) and result.get("isError") is not True


class Matrix:
    """One server, its tokens, its catalog, and how to start a parked acme run."""

    def __init__(self, c: McpClient, tokens: dict[str, str], db: asyncpg.Pool) -> None:
        self.c = c
        self.tokens = tokens
        self.db = db
        self.tools: dict[str, dict[str, Any]] = {}
        self.surfaces: list[Surface] = []

    async def load_catalog(self) -> None:
        listings = {
            caller: await self.c.result("tools/list", headers=_headers(self.tokens, caller))
            for caller in CALLERS
        }
        assert len({orjson.dumps(v["tools"]) for v in listings.values()}) == 1  # one catalog
        self.tools = {t["name"]: t for t in listings["own"]["tools"]}
        templates = await self.c.result(
            "resources/templates/list", headers=_headers(self.tokens, "own")
        )
        handle_tools = [
            n for n, t in self.tools.items() if "handle" in t["inputSchema"].get("required", [])
        ]
        run_uris = [
            t["uriTemplate"]
            for t in templates["resourceTemplates"]
            if t["uriTemplate"].startswith("tether://runs/")
        ]
        self.surfaces = [
            *[("tools/call", n) for n in handle_tools],
            ("tasks/get", ""),
            ("tasks/update", ""),
            ("tasks/cancel", ""),
            *[("resources/read", u) for u in run_uris],
        ]
        # Every generated kind is in the matrix (the catalog order: catalog.py).
        assert {"gate_status", "gate_watch", "signal_gate", "answer_gate", "gate_update_note"} <= (
            set(handle_tools)
        )
        assert len(run_uris) == 3

    async def parked_run(self) -> tuple[str, str]:
        """A new acme run parked on its approval: (id, the wait's key)."""
        own = _headers(self.tokens, "own")
        created = await self.c.result(
            "tools/call", {"name": "start_gate", "arguments": {"body": {}}}, headers=own
        )
        run_id = created["taskId"]
        await self.c.wait_task(run_id, {"input_required"}, headers=own)
        waits = orjson.loads(
            await self.db.fetchval("SELECT waits::text FROM executions WHERE id = $1", run_id)
        )
        return run_id, waits[0]["key"]

    async def send(
        self, surface: Surface, caller: str, run_id: str, wait_key: str
    ) -> tuple[int, dict[str, Any]]:
        method, params = _request(surface, self.tools, run_id, wait_key)
        resp = await self.c.request(method, params, headers=_headers(self.tokens, caller))
        body: dict[str, Any] = resp.json()
        body.pop("id", None)
        return resp.status_code, body


@contextlib.asynccontextmanager
async def _matrix(
    mcp_server: ServeFn, client: Callable[[str], McpClient], db: asyncpg.Pool
) -> AsyncIterator[Matrix]:
    """A server with one token per caller, its catalog loaded."""
    tokens: dict[str, str] = {}
    entries = []
    for caller, (tenant, role, _) in CALLERS.items():
        tokens[caller], entry = new_token(caller, role, tenant)
        entries.append(entry)
    async with mcp_server(app, api_tokens=",".join(entries)) as url:
        m = Matrix(client(url), tokens, db)
        await m.load_catalog()
        yield m


async def test_another_tenants_run_is_refused_exactly_like_a_missing_one(
    mcp_server: ServeFn, client: Callable[[str], McpClient], db: asyncpg.Pool
) -> None:
    """Our choice: for every surface, a caller outside the run's tenant gets the
    answer a nonexistent id gets — same HTTP status, same body with the id swapped — and no
    table changes (executions rows and versions, history, signals, updates, steps)."""
    async with _matrix(mcp_server, client, db) as m:
        run_id, key = await m.parked_run()
        missing = new_execution_id()
        refused = [c for c, (_, _, sees) in CALLERS.items() if not sees]
        for surface in m.surfaces:
            for caller in refused:
                before = await _snapshot(db)
                status, body = await m.send(surface, caller, run_id, key)
                assert await _snapshot(db) == before, (surface, caller)
                status_missing, body_missing = await m.send(
                    surface, caller, missing, key.replace(run_id, missing)
                )
                assert not _served(body), (surface, caller, body)
                swapped = orjson.loads(
                    orjson.dumps(body_missing).replace(missing.encode(), run_id.encode())
                )
                assert (status, body) == (status_missing, swapped), (surface, caller)
                if surface[0].startswith("tasks/"):
                    assert body["error"]["code"] == codes.INVALID_PARAMS  # "Task not found"


async def test_the_runs_tenant_and_an_unbound_admin_are_served(
    mcp_server: ServeFn, client: Callable[[str], McpClient], db: asyncpg.Pool
) -> None:
    """The same surfaces, as the run's own tenant and as an admin bound to no tenant: each is
    served (a result, not an error), on a fresh parked run per call."""
    async with _matrix(mcp_server, client, db) as m:
        for surface in m.surfaces:
            for caller in [c for c, (_, _, sees) in CALLERS.items() if sees]:
                run_id, key = await m.parked_run()
                _, body = await m.send(surface, caller, run_id, key)
                assert _served(body), (surface, caller, body)


async def test_runs_started_by_a_caller_belong_to_its_tenant(
    mcp_server: ServeFn, client: Callable[[str], McpClient], db: asyncpg.Pool
) -> None:
    """Every tool that takes no handle (start_<wf>, the workflow tool) starts a run in the
    caller's tenant (none for an unbound caller); only callers that see that tenant can poll
    it, the others get "Task not found"."""
    async with _matrix(mcp_server, client, db) as m:
        starters = [
            n for n, t in m.tools.items() if "handle" not in t["inputSchema"].get("required", [])
        ]
        assert {"start_gate", "gate_run"} <= set(starters)
        for name in starters:
            args: dict[str, Any] = {"body": {}} if name.startswith("start_") else {}
            for caller, (tenant, _, _) in CALLERS.items():
                created = await m.c.result(
                    "tools/call",
                    {"name": name, "arguments": args},
                    headers=_headers(m.tokens, caller),
                )
                run_id = created["taskId"]
                stored = await db.fetchval("SELECT tenant FROM executions WHERE id = $1", run_id)
                assert stored == tenant, (name, caller)
                for reader, (r_tenant, r_role, _) in CALLERS.items():
                    sees = r_tenant == tenant or (r_role == "admin" and r_tenant is None)
                    body = await m.c.call(
                        "tasks/get", {"taskId": run_id}, headers=_headers(m.tokens, reader)
                    )
                    assert ("result" in body) is sees, (name, caller, reader, body)
                    if not sees:
                        assert body["error"]["code"] == codes.INVALID_PARAMS  # Task not found
