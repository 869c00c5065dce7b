"""`dagu_execute` under concurrent calls, over real HTTP (issue 13): starts that race on one
`dagRunId` yield exactly one run (the database's uniqueness decides, not a check before the
insert); decisions that race on one waiting step take effect once, and a decision based on an
attempt that has moved on is a `conflict` naming the current attempt."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import asyncpg
import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_dagu_execute import dag_app, execute, ok, refused
from tests.mcp_client import McpClient

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
    conn = await asyncpg.connect(db_url)
    try:
        counts = await conn.fetch(
            "SELECT business_id, count(*) AS n FROM executions WHERE workflow = 'quick' "
            "GROUP BY business_id ORDER BY business_id"
        )
    finally:
        await conn.close()
    assert [(r["business_id"], r["n"]) for r in counts] == [(f"same-{i}", 1) for i in range(3)]


async def test_racing_decisions_on_one_gate_take_effect_once(
    mcp_server: ServeFn, client: Client, tmp_path: Path
) -> None:
    """One push-back and several approvals, all based on the same attempt, at once: exactly
    one decision is taken; each other one is a conflict; the gate is decided once."""
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
        # a decision on the attempt that has moved on is refused, naming the current one
        later = ok(await execute(c, action="start", name="gated", dagRunId="g-r2", wait=True))[
            "run"
        ]["attemptId"]
        assert later != attempt
