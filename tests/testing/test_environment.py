"""WorkflowEnvironment itself: a database of its own per environment, typed results, history
and step records to assert on, and clear errors when it is misused."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
import pytest
from pydantic import BaseModel

import tether
import tether.client
import tether.testing
from tests.conftest import direct_url
from tether.runtime import clock
from tether.testing import Event, InvalidInput, RunFailed, RunNotFound, Step, WorkflowEnvironment

pytestmark = pytest.mark.postgres


class Total(BaseModel):
    n: int


def adder_app() -> tether.App:
    app = tether.App()

    def add(x: int) -> int:
        return x + 1

    @app.workflow
    async def adder(ctx: tether.Context, start: Total) -> Total:
        n = await ctx.step(add, start.n, name="add")
        await ctx.sleep(timedelta(minutes=5))
        return Total(n=n)

    @app.workflow
    async def broken(ctx: tether.Context) -> None:
        raise ValueError("no good")

    return app


async def test_result_is_typed_as_the_workflow_returns_it() -> None:
    """A model output comes back as the model (from its stored JSON), input given as a model."""
    async with WorkflowEnvironment(adder_app()) as env:
        run = await env.start("adder", Total(n=1))
        assert await env.result(run) == Total(n=2)


async def test_history_and_steps_are_typed_records_in_order() -> None:
    """history gives Events (created … ended) with the database's (skipped) times; steps gives
    the recorded calls by position."""
    async with WorkflowEnvironment(adder_app()) as env:
        run = await env.start("adder", {"n": 1})
        await env.result(run)
        events = await env.history(run)
        steps = await env.steps(run)
    assert [(e.id, e.type) for e in events] == [(1, "created"), (2, "ended")]
    assert all(isinstance(e, Event) for e in events)
    assert events[1].data == {"status": "completed", "error": None}
    assert events[1].at - events[0].at >= timedelta(minutes=5)
    assert [(s.seq, s.kind, s.name, s.done) for s in steps] == [
        (1, "step", "add", True),
        (2, "sleep", "sleep", True),
    ]
    assert steps[0] == Step(1, "step", "add", {"value": 2}, True)


async def test_a_failed_run_raises_run_failed_with_its_error() -> None:
    """result() of a run whose workflow raised is RunFailed, with the recorded error."""
    async with WorkflowEnvironment(adder_app()) as env:
        run = await env.start("broken")
        with pytest.raises(RunFailed) as failed:
            await env.result(run)
    assert failed.value.status == "failed"
    assert failed.value.error["type"] == "ValueError"
    assert failed.value.error["message"] == "no good"


async def test_each_environment_has_a_database_of_its_own_dropped_at_the_end() -> None:
    """Two environments at once use two databases; a run of one is unknown to the other; the
    database is gone after the block."""
    async with WorkflowEnvironment(adder_app()) as first:
        async with WorkflowEnvironment(adder_app(), time_skipping=False) as second:
            assert first.database_url != second.database_url
            run = await first.start("broken")
            with pytest.raises(RunNotFound):
                await second.run(run)
        # Asked of the server itself: through a pooler the refusal comes on a connection the
        # pooler accepted, which the driver then leaves open.
        url = direct_url(first.database_url)
    with pytest.raises(RuntimeError):
        _ = first.database_url
    with pytest.raises(asyncpg.InvalidCatalogNameError):
        await asyncpg.connect(url)


async def test_one_time_skipping_environment_at_a_time_holds_the_clock() -> None:
    """A second environment with time skipping while one runs is refused; after the first
    ends, the process's clock is the system clock again."""
    async with WorkflowEnvironment(adder_app()):
        with pytest.raises(RuntimeError, match="another clock"):
            async with WorkflowEnvironment(adder_app()):
                pass
    assert clock.now() - clock.system() < timedelta(seconds=1)


async def test_the_environment_is_used_inside_async_with() -> None:
    """Its runtime exists only inside the block."""
    env = WorkflowEnvironment(adder_app())
    with pytest.raises(RuntimeError, match="async with"):
        _ = env.ops


async def test_refusals_are_the_kits_errors_with_what_was_wrong() -> None:
    """A bad input is InvalidInput with its violations; an unknown run is RunNotFound."""
    async with WorkflowEnvironment(adder_app()) as env:
        with pytest.raises(InvalidInput) as refused:
            await env.start("adder", {"n": "many"})
        assert refused.value.violations and refused.value.violations[0].startswith("n:")
        with pytest.raises(RunNotFound):
            await env.status("ex_" + "a" * 32)


async def test_the_kit_raises_the_clients_error_classes() -> None:
    """Our choice: a test catches what an application catches (one error tree): the kit's
    refusals are `tether.client`'s classes, its finer answer refusals kinds of AnswerRefused,
    and a key held by other input is the client's StartConflict naming the run."""
    async with WorkflowEnvironment(adder_app()) as env:
        with pytest.raises(tether.client.RunNotFound):
            await env.status("ex_" + "a" * 32)
        with pytest.raises(tether.client.InvalidInput):
            await env.start("adder", {"n": "many"})
        first = await env.start("adder", {"n": 1}, idempotency_key="k")
        with pytest.raises(tether.client.StartConflict) as conflict:
            await env.start("adder", {"n": 2}, idempotency_key="k")
        assert conflict.value.run_id == first
    assert tether.testing.KitError is tether.client.ClientError
    assert tether.testing.DatabaseUnavailable is tether.client.TransportError
    for refusal in ("AnswerRejected", "AnswerConflict", "WaitNotOpen"):
        assert issubclass(getattr(tether.testing, refusal), tether.client.AnswerRefused)
