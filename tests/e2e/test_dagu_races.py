"""`dagu_execute` under concurrent calls, over real HTTP: starts that race on one
`dagRunId` yield exactly one run (the database's uniqueness decides, not a check before the
insert); decisions that race on one waiting step take effect once, and a decision based on an
attempt that has moved on is a `conflict` naming the current attempt."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from tests.conftest import direct_url
from tests.e2e.conftest import ServeFn
from tests.e2e.test_dagu_execute import dag_app, execute, ok, refused
from tests.mcp_client import McpClient
from tether.runtime.operations import Operations

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]
Client = Callable[[str], McpClient]
RACERS = 8


async def test_concurrent_starts_with_one_dag_run_id_make_exactly_one_run(
    mcp_server: ServeFn, client: Client, tmp_path: Path, db_url: str
) -> None:
    async with mcp_server(dag_app(tmp_path)) as url:
        c = client(url)
        for round_ in range(3):
            run_id = f"same-{round_}"
            results = await asyncio.gather(
                *(
                    execute(c, action="start", name="quick", dagRunId=run_id, params={"N": str(i)})
                    for i in range(RACERS)
                )
            )
            won = [r for r in results if r["isError"] is False]
            assert len(won) == 1, [r["structuredContent"] for r in results]
            for lost in (r for r in results if r["isError"]):
                err = refused(lost, "conflict", "dagRunId")
                assert run_id in err["message"]
    conn = await asyncpg.connect(direct_url(db_url))
    try:
        counts = await conn.fetch(
            "SELECT business_id, count(*) AS n FROM executions WHERE workflow = 'quick' "
            "GROUP BY business_id ORDER BY business_id"
        )
    finally:
        await conn.close()
    assert [(r["business_id"], r["n"]) for r in counts] == [(f"same-{i}", 1) for i in range(3)]


async def test_racing_decisions_on_one_gate_take_effect_once(
    mcp_server: ServeFn, client: Client, tmp_path: Path, db_url: str
) -> None:
    """One push-back and several approvals, all based on the same attempt, at once: exactly
    one decision is taken; each other one is a conflict; the gate got one answer."""
    async with mcp_server(dag_app(tmp_path)) as url:
        c = client(url)
        started = ok(await execute(c, action="start", name="gated", dagRunId="g-r", wait=True))
        attempt = started["run"]["attemptId"]
        base = {"name": "gated", "dagRunId": "g-r", "stepName": "publish", "attemptId": attempt}
        calls = [execute(c, action="push_back", **base, inputs={"NOTE": "x"})]
        calls += [
            execute(c, action="approve", **base, inputs={"TICKET": f"T-{i}"})
            for i in range(RACERS - 1)
        ]
        results = await asyncio.gather(*calls)
        won = [r["structuredContent"] for r in results if r["isError"] is False]
        assert len(won) == 1, [r["structuredContent"] for r in results]
        for lost in (r for r in results if r["isError"]):
            refused(lost, "conflict")
    conn = await asyncpg.connect(direct_url(db_url))
    try:
        answers = await conn.fetchval(
            "SELECT count(*) FROM signals s JOIN executions e ON e.id = s.execution_id "
            "WHERE e.business_id = 'g-r'"
        )
    finally:
        await conn.close()
    assert answers == 1


async def test_a_decision_that_loses_the_race_is_refused_and_never_reaches_the_new_attempt(
    mcp_server: ServeFn, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving forced: between the approve's attempt check and its answer, another
    call pushes the gate back and the run parks at the gate again under a new attempt. The
    approve must not land on the new wait; it is a conflict naming the new attempt."""
    real = Operations.answer
    armed = [True]

    async def racing(
        self: Operations, execution_id: str, key: str, response: Any, **kw: Any
    ) -> Any:
        if armed[0] and response.get("decision") == "approve":
            armed[0] = False
            await real(self, execution_id, key, {"decision": "push_back", "NOTE": "x"}, by="x")
            await self.wait_until(
                execution_id,
                lambda r: any(w.get("kind") == "approval" and w["key"] != key for w in r.waits),
                timeout=20,
            )
        return await real(self, execution_id, key, response, **kw)

    monkeypatch.setattr(Operations, "answer", racing)
    async with mcp_server(dag_app(tmp_path)) as url:
        c = client(url)
        started = ok(await execute(c, action="start", name="gated", dagRunId="g-l", wait=True))
        attempt = started["run"]["attemptId"]
        base = {"name": "gated", "dagRunId": "g-l", "stepName": "publish"}
        err = refused(
            await execute(c, action="approve", **base, attemptId=attempt, inputs={"TICKET": "T"}),
            "conflict",
            "attemptId",
        )
        read = await c.result("resources/read", {"uri": started["runUri"]}, capabilities={})
        run = orjson.loads(read["contents"][0]["text"])
    new_attempt = err["details"]["attemptId"]
    assert new_attempt not in (None, attempt)
    assert run["attemptId"] == new_attempt
    (gate,) = [s for s in run["steps"] if s["name"] == "publish"]
    assert gate["statusLabel"] == "waiting", gate  # the approve did not land on the new wait
