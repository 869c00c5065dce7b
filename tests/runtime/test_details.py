"""What a run records of itself for readers: its details line through a replay, and the tries a
step took. Our choices (the `runs show --history` timeline reads both)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tether.runtime.context import Context
from tether.runtime.policy import RetryPolicy
from tether.runtime.registry import App
from tether.runtime.service import Runtime

from .conftest import Start

pytestmark = pytest.mark.postgres

TIMEOUT = 20.0


class Rounds(BaseModel):
    rounds: int


app = App("details")


def work(i: int) -> int:
    return i


@app.workflow
async def rounds(ctx: Context, job: Rounds) -> str:
    """Set a details line and run a step per round, then wait for `go`."""
    for i in range(job.rounds):
        await ctx.set_details(f"round {i}")
        await ctx.step(work, i)
    await ctx.wait_for_signal("go")
    return "done"


tries: dict[str, int] = {}


def flaky(key: str) -> str:
    tries[key] = tries.get(key, 0) + 1
    if tries[key] < 3:
        raise ConnectionError("not yet")
    return "ok"


@app.workflow
async def retried(ctx: Context, key: str) -> str:
    """A step that fails twice, then succeeds."""
    policy = RetryPolicy(max_attempts=5, initial_interval=0.0)
    result: str = await ctx.step(flaky, key, retry=policy)
    return result


async def writes_after_the_answer(rt: Runtime, n: int) -> int:
    """How many writes the run of `n` rounds makes from its signal to its end."""
    run = (await rt.ops.start("rounds", {"rounds": n})).execution.id
    parked = await rt.ops.wait_until(run, lambda r: r.status == "waiting", timeout=TIMEOUT)
    assert parked.current.details == f"round {n - 1}"
    await rt.ops.signal(run, "go")
    ended = (await rt.ops.wait_for_end(run, timeout=TIMEOUT)).current
    assert (ended.status, ended.details) == ("completed", f"round {n - 1}")
    return ended.version - parked.current.version


async def test_a_replay_does_not_write_the_details_of_earlier_rounds_again(start: Start) -> None:
    """Resuming after a wait replays every round's `set_details`; none of them is written on
    its own (readers would see `round 0` come back), so a run of six rounds makes as many
    writes after its answer as a run of one."""
    async with start(app) as rt:
        assert await writes_after_the_answer(rt, 6) == await writes_after_the_answer(rt, 1)


async def test_a_step_that_succeeded_after_failed_tries_keeps_their_count(start: Start) -> None:
    """The step's record holds its value and `failures: 2` (replay reads only the value)."""
    async with start(app) as rt:
        run = (await rt.ops.start("retried", "k")).execution.id
        ended = (await rt.ops.wait_for_end(run, timeout=TIMEOUT)).current
        (record,) = [r for r in await rt.ops.steps(run) if r.kind == "step"]
    assert ended.output == "ok"
    assert record.result == {"value": "ok", "failures": 2}
    assert record.at is not None
