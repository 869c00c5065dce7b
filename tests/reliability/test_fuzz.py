"""The fuzz phase checked: against a sound server on loopback its verdict is a pass, and each
fault injected into that server — a 5xx on one surface, a row changed by a refused form, a
stalled event loop — turns it into a fail that names the fault."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from reliability.cluster import Proc
from reliability.fuzz import BODY_CAP, DAGU_TOOL, PLAN_TOOL, Fixtures, run_fuzz, write_dags
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reliability import app as rel_app
from tests.conftest import direct_url
from tests.e2e.conftest import on_loopback, server_settings
from tether.app import create_app

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

REQUESTS = 600


@dataclass
class Servers:
    """What the phase needs of a cluster: its servers."""

    servers: list[Proc]


class Fault:
    """An ASGI wrapper that breaks the server it wraps in one way, or not at all (`kind` None):
    `console` answers 500 to console form posts, `dag` / `plan` answer 500 to calls of that
    tool, `row` lets a console form post through but first writes a row, `stall` holds the
    event loop for a while on the first inline DAG spec."""

    def __init__(self, app: ASGIApp, db_url: str) -> None:
        self.app = app
        self.db_url = db_url
        self.kind: str | None = None
        self.hits = 0
        self.stalled = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.kind is None or scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        path: str = scope["path"]
        if self._fails(path, body):
            self.hits += 1
            await send({"type": "http.response.start", "status": 500, "headers": []})
            await send({"type": "http.response.body", "body": b"injected"})
            return
        if self.kind == "row" and path.startswith("/console/"):
            self.hits += 1
            conn = await asyncpg.connect(direct_url(self.db_url))
            try:
                await conn.execute("INSERT INTO fuzz_probe DEFAULT VALUES")
            finally:
                await conn.close()
        if self.kind == "stall" and DAGU_TOOL.encode() in body and not self.stalled:
            self.stalled = True
            self.hits += 1
            time.sleep(6.0)  # noqa: ASYNC251 — the fault under test: a handler holding the loop
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _fails(self, path: str, body: bytes) -> bool:
        if self.kind == "console":
            return path.startswith("/console/")
        tool = {"dag": DAGU_TOOL, "plan": PLAN_TOOL}.get(self.kind or "")
        return tool is not None and f'"name": "{tool}"'.encode() in body


@dataclass
class Site:
    fault: Fault
    cluster: Servers
    db: asyncpg.Pool
    fixtures: Fixtures


@contextlib.asynccontextmanager
async def site(db_url: str, db: asyncpg.Pool, tmp_path: Path) -> AsyncIterator[Site]:
    await db.execute(rel_app.SCHEMA)
    await db.execute("CREATE TABLE fuzz_probe (id bigserial PRIMARY KEY)")
    settings = server_settings(
        db_url, console=True, dags=write_dags(tmp_path / "dags"), max_body_bytes=BODY_CAP
    )
    web = create_app(rel_app.app, settings, db_url)
    fault = Fault(web, db_url)
    async with on_loopback(fault, "") as base:
        ops = web.state.runtime.ops
        asked = await ops.start("rel_approval", {"n": 0, "phase": "fz"})
        parked = await ops.start("rel_cancel", {"n": 1, "phase": "fz", "mode": "sleep"})
        view = await ops.wait_until(
            asked.execution.id, lambda r: r.status == "waiting" and bool(r.waits), timeout=10
        )
        await ops.wait_until(parked.execution.id, lambda r: r.status == "waiting", timeout=10)
        fixtures = Fixtures(
            asked.execution.id, view.current.waits[0]["key"], "ex_none", parked.execution.id
        )
        port = int(base.rsplit(":", 1)[1])
        proc = Proc("serve1", "serve", port, {}, tmp_path)
        yield Site(fault, Servers([proc]), db, fixtures)


async def fuzz(s: Site, kind: str | None, rng_seed: int = 7) -> list[str]:
    s.fault.kind = kind
    s.fault.hits = 0
    report = await run_fuzz(
        s.cluster,  # type: ignore[arg-type]  # the phase reads only .servers
        s.db,
        random.Random(rng_seed),
        requests=REQUESTS,
        fixtures=s.fixtures,
    )
    problems = [*report.problems, *report.ledger.violations]
    assert report.ok == (not problems and report.five_xx == 0), problems
    if kind is not None:
        assert s.fault.hits > 0, "the fuzzer never reached the fault"

    return problems


async def test_a_sound_server_passes_and_each_injected_fault_fails_the_phase(
    db_url: str, db: asyncpg.Pool, tmp_path: Path
) -> None:
    """Our choice: the phase's verdict can fail — on a 5xx from the console, from an inline
    DAG spec or from a create_workflow plan, on a row a refused form changed, and on a server
    that stops answering for a while; the same phase passes the server unbroken."""
    async with site(db_url, db, tmp_path) as s:
        clean = await fuzz(s, None)
        assert clean == []
        console = await fuzz(s, "console")
        assert any("console" in p and "5xx" in p for p in console), console
        dag = await fuzz(s, "dag")
        assert any("5xx" in p and DAGU_TOOL in p for p in dag), dag
        plan = await fuzz(s, "plan")
        assert any("5xx" in p and PLAN_TOOL in p for p in plan), plan
        row = await fuzz(s, "row")
        assert any(p.startswith("table fuzz_probe changed") for p in row), row
        stall = await fuzz(s, "stall")
        assert any("serve1 unresponsive" in p for p in stall), stall
