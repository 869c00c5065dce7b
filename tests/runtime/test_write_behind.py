"""A step's write left in flight (`RunIO.write_behind`, `Context.step(behind=True)`): later
writes wait for it, user code runs only once it has committed, a gated shell command runs
only once it has committed, and when it fails (the lease gone) nothing after it runs."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import asyncpg
import pytest

from tether.runtime.context import Context
from tether.runtime.dag.shell import GATE_PREFIX, argv_for, run_command
from tether.runtime.executor import RunIO
from tether.runtime.signals import LeaseGone
from tether.storage.checkpoints import CheckpointWriter
from tether.storage.errors import LeaseLost
from tether.storage.repo import Checkpoint
from tether.storage.rows import ExecutionRow, RunState

pytestmark = pytest.mark.postgres

INSERT = """
INSERT INTO executions (id, workflow, business_id, status, root_id, last_event_id,
                        lease_owner, attempt)
VALUES ($1, 'wf', $1, 'running', $1, 1, $2, 1)
"""


def _record(seq: int, name: str) -> dict[str, object]:
    return {"seq": seq, "kind": "step", "name": name, "result": {"value": seq}, "done": True}


async def _context(db: asyncpg.Pool, run: str, owner: str) -> tuple[Context, RunIO]:
    row = await db.fetchrow("SELECT * FROM executions WHERE id = $1", run)
    assert row is not None
    er = ExecutionRow.from_record(row)
    io = RunIO(db, run, owner, 1, 1, writer=CheckpointWriter(db))
    return Context(er, RunState((), (), ()), io), io


async def test_writes_stay_in_order_and_user_code_waits_for_the_one_in_flight(
    db: asyncpg.Pool,
) -> None:
    await db.execute(INSERT, "ex_a", "w")
    ctx, io = await _context(db, "ex_a", "w")
    seen: list[int] = []

    async def count() -> int:
        n = await db.fetchval("SELECT count(*) FROM steps WHERE execution_id = 'ex_a'")
        seen.append(n)
        return int(n)

    await ctx.step(count, name="one", behind=True)  # its write left in flight
    in_flight = [io.behind is not None]
    await ctx.step(count, name="two", behind=True)  # runs once "one" has committed
    await ctx.step(count, name="three")  # waits for "two", then commits its own
    in_flight.append(io.behind is not None)
    assert in_flight == [True, False]
    assert seen == [0, 1, 2]
    names = await db.fetch("SELECT name FROM steps WHERE execution_id = 'ex_a' ORDER BY seq")
    assert [r["name"] for r in names] == ["one", "two", "three"]


async def test_a_lost_lease_stops_the_gated_command_before_it_runs(
    db: asyncpg.Pool, tmp_path: Path
) -> None:
    """The write in flight is refused (another worker holds the run now): the next step's
    shell, started meanwhile, never runs its command; the gate raises LeaseGone (the run
    stops without writing), not an error the step could be failed with."""
    await db.execute(INSERT, "ex_b", "someone-else")
    ctx, io = await _context(db, "ex_b", "w")
    await io.write_behind(Checkpoint(records=[_record(1, "one")]))
    mark = tmp_path / "ran"
    argv = argv_for(GATE_PREFIX + f"touch {mark}", "sh")
    with pytest.raises(LeaseGone):
        await run_command(argv, env=os.environ, gate=ctx.earlier_writes_committed())
    assert not mark.exists()  # run_command reaped the shell before it raised
    assert await db.fetchval("SELECT count(*) FROM steps WHERE execution_id = 'ex_b'") == 0


async def test_a_failed_write_nobody_waits_for_cancels_the_run(db: asyncpg.Pool) -> None:
    """While the run does something else (a long command), the refused write cancels it."""
    await db.execute(INSERT, "ex_c", "someone-else")
    _ctx, io = await _context(db, "ex_c", "w")

    async def run() -> None:
        await io.write_behind(Checkpoint(records=[_record(1, "one")]))
        await asyncio.sleep(30)  # the next step's long work

    task = asyncio.create_task(run())
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(10):
            await task
    with pytest.raises(LeaseLost):  # a later write still hears why
        await io.write(Checkpoint(records=[_record(2, "two")]))
