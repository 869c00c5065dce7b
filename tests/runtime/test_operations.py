"""The operations module: idempotent start, updates, cancel, terminate, again (each surface's
retry, resume and rerun), list."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel, Field

import tether
from tether.runtime import errors
from tether.runtime.context import Context
from tether.runtime.operations import Operations
from tether.runtime.registry import App

from .conftest import Start

pytestmark = pytest.mark.postgres


class Order(BaseModel):
    item: str
    qty: int = Field(ge=1)


def order_app() -> App:
    app = App()

    @app.workflow
    async def order(ctx: Context, o: Order) -> str:
        note = await ctx.wait_for_signal("ship")
        return f"{o.qty} x {o.item}: {note}"

    return app


async def test_idempotent_start_returns_the_same_run(db: object) -> None:
    """Same key + same input → the same run, deduped; different input → IdempotencyMismatch."""
    ops = Operations(db, order_app())  # type: ignore[arg-type]
    a = await ops.start("order", {"item": "pen", "qty": 2}, idempotency_key="k1")
    b = await ops.start("order", {"item": "pen", "qty": 2}, idempotency_key="k1")
    assert (a.deduped, b.deduped) == (False, True)
    assert a.execution.id == b.execution.id
    with pytest.raises(errors.IdempotencyMismatch) as mismatch:
        await ops.start("order", {"item": "pen", "qty": 3}, idempotency_key="k1")
    assert mismatch.value.execution_id == a.execution.id  # the run holding the key
    with pytest.raises(errors.RunAlreadyActive):
        await ops.start(
            "order", {"item": "pen", "qty": 2}, idempotency_key="k1", on_live_match="fail"
        )
    c = await ops.start("order", {"item": "pen", "qty": 2})
    assert c.execution.id != a.execution.id


async def test_concurrent_starts_with_one_key_create_one_run(db: object) -> None:
    """Twenty racing creates with one key make exactly one run."""
    ops = Operations(db, order_app())  # type: ignore[arg-type]
    results = await asyncio.gather(
        *(ops.start("order", {"item": "ink", "qty": 1}, idempotency_key="race") for _ in range(20))
    )
    assert len({r.execution.id for r in results}) == 1
    assert sum(not r.deduped for r in results) == 1


async def test_invalid_input_is_refused_before_anything_is_stored(db: object) -> None:
    """InvalidInput lists the failing fields and no row is written; unknown workflow too."""
    ops = Operations(db, order_app())  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidInput) as info:
        await ops.start("order", {"item": "pen", "qty": 0})
    assert info.value.errors[0]["loc"] == ["qty"]
    with pytest.raises(errors.WorkflowNotFound):
        await ops.start("nope", {})
    assert await db.fetchval("SELECT count(*) FROM executions") == 0  # type: ignore[attr-defined]


class Deadline(BaseModel):
    days: int


def update_app() -> App:
    app = App()

    @app.workflow
    async def project(ctx: Context) -> int:
        got = await ctx.wait_for_update("set_deadline")
        return int(got.output["days"])

    def not_in_past(d: Deadline) -> str | None:
        return "deadline must be in the future" if d.days <= 0 else None

    @app.update("project", validator=not_in_past)
    async def set_deadline(ctx: object, d: Deadline) -> dict[str, int]:
        return {"days": d.days}

    return app


async def test_update_validator_rejects_before_admission(start: Start) -> None:
    """A refused update leaves no update row and no history event; a valid one returns the
    handler's output and reaches the workflow."""
    async with start(update_app()) as rt:
        started = await rt.ops.start("project")
        run_id = started.execution.id
        await rt.ops.wait_until(run_id, lambda r: r.status == "waiting", timeout=10)
        before = await rt.ops.history(run_id)
        with pytest.raises(errors.UpdateRejected) as info:
            await rt.ops.update(run_id, "set_deadline", {"days": 0})
        with pytest.raises(errors.InvalidInput):
            await rt.ops.update(run_id, "set_deadline", {"days": "soon"})
        with pytest.raises(errors.UpdateNotFound):
            await rt.ops.update(run_id, "other", {})
        assert await rt.ops.history(run_id) == before
        assert await rt.pool.fetchval("SELECT count(*) FROM updates") == 0
        out = await rt.ops.update(run_id, "set_deadline", {"days": 3}, timeout=10)
        view = await rt.ops.wait_for_end(run_id, timeout=10)
    assert info.value.reason == "deadline must be in the future"
    assert out == {"days": 3}
    assert view.current.output == 3


async def test_an_update_handler_gets_the_run_it_acts_on(start: Start) -> None:
    """Our choice (the public API): an update handler's first argument is a
    `tether.UpdateContext` naming the run, its workflow and the update."""
    app = App()

    @app.workflow
    async def project(ctx: Context) -> None:
        await ctx.wait_for_update("locate")

    @app.update("project")
    async def locate(ctx: tether.UpdateContext, d: Deadline) -> list[str]:
        assert isinstance(ctx, tether.UpdateContext)
        return [ctx.execution_id, ctx.workflow, ctx.update]

    async with start(app) as rt:
        run_id = (await rt.ops.start("project")).execution.id
        await rt.ops.wait_until(run_id, lambda r: r.status == "waiting", timeout=10)
        out = await rt.ops.update(run_id, "locate", {"days": 1}, timeout=10)
    assert out == [run_id, "project", "locate"]


async def test_an_update_handler_without_an_input_runs(start: Start) -> None:
    """Our choice: `App.update` accepts `(ctx)` as well as `(ctx, input)`, and a handler
    registered with one parameter is called with one."""
    app = App()

    @app.workflow
    async def project(ctx: Context) -> None:
        await ctx.wait_for_update("ping")

    @app.update("project")
    async def ping(ctx: tether.UpdateContext) -> str:
        return f"pong from {ctx.update}"

    async with start(app) as rt:
        run_id = (await rt.ops.start("project")).execution.id
        await rt.ops.wait_until(run_id, lambda r: r.status == "waiting", timeout=10)
        out = await rt.ops.update(run_id, "ping", None, timeout=10)
    assert out == "pong from ping"


async def test_cancel_a_parked_run_ends_it_cancelled_and_repeats_are_no_ops(start: Start) -> None:
    """Cooperative cancel wakes the parked run, which ends cancelled; cancelling again is an
    idempotent acknowledgement."""
    async with start(order_app()) as rt:
        started = await rt.ops.start("order", {"item": "pen", "qty": 1})
        await rt.ops.wait_until(started.execution.id, lambda r: r.status == "waiting", timeout=10)
        await rt.ops.cancel(started.execution.id, reason="no longer needed")
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
        again = await rt.ops.cancel(started.execution.id)
    assert view.current.status == "cancelled"
    assert again.status == "cancelled" and again.version == view.current.version


async def test_terminate_ends_a_live_run_at_once(db: object) -> None:
    """terminate needs no worker; a second terminate is a RunEnded conflict."""
    ops = Operations(db, order_app())  # type: ignore[arg-type]
    started = await ops.start("order", {"item": "pen", "qty": 1})
    row = await ops.terminate(started.execution.id, reason="stop")
    assert row.status == "terminated" and row.error["message"] == "stop"
    with pytest.raises(errors.RunEnded):
        await ops.terminate(started.execution.id)


async def test_signal_to_an_ended_run_is_refused(db: object) -> None:
    """Signals need a live run."""
    ops = Operations(db, order_app())  # type: ignore[arg-type]
    started = await ops.start("order", {"item": "pen", "qty": 1})
    await ops.terminate(started.execution.id)
    with pytest.raises(errors.RunEnded):
        await ops.signal(started.execution.id, "ship", "now")


async def test_retry_starts_a_linked_run_with_a_new_business_id(start: Start) -> None:
    """retry after a failure: new business id, old handle follows to the new run."""
    app = App()
    attempts = {"n": 0}

    @app.workflow
    async def once_broken(ctx: Context) -> str:
        attempts["n"] += 1
        if attempts["n"] == 1:
            raise RuntimeError("first time fails")
        return "ok"

    async with start(app) as rt:
        started = await rt.ops.start("once_broken")
        failed = await rt.ops.wait_for_end(started.execution.id, timeout=10)
        assert failed.current.status == "failed"
        new = await rt.ops.again(started.execution.id)
        view = await rt.ops.wait_until(
            started.execution.id, lambda r: r.status == "completed", timeout=10
        )
        with pytest.raises(errors.Conflict):
            await rt.ops.again(started.execution.id)
    assert new.business_id != failed.current.business_id
    assert view.current.id == new.id and view.current.output == "ok"


async def test_rerun_seals_the_old_run_which_keeps_its_ending(start: Start) -> None:
    """An operator rerun reuses the business id; the old run is sealed and not followed."""
    app = App()

    @app.workflow
    async def fails(ctx: Context) -> None:
        raise RuntimeError("always")

    async with start(app) as rt:
        started = await rt.ops.start("fails", business_id="job-7")
        await rt.ops.wait_for_end(started.execution.id, timeout=10)
        new = await rt.ops.again(started.execution.id, business_id="same")
        old = (await rt.ops.get(started.execution.id)).current
        with pytest.raises(errors.Conflict):
            await rt.ops.again(started.execution.id, business_id="same")
    assert (old.status, old.sealed_from, old.id) == (
        "continued_as_new",
        "failed",
        started.execution.id,
    )
    assert new.business_id == "job-7" and new.predecessor_id == old.id


async def test_a_run_goes_again_once_whichever_business_id(start: Start) -> None:
    """Our choice: a run that already went on under a new business id is not run again in
    its place under its own (before, a rerun sealed it and forked its chain), and a run sealed
    by a rerun is not retried; each refusal writes nothing."""
    app = App()

    @app.workflow
    async def fails(ctx: Context) -> None:
        raise RuntimeError("always")

    async with start(app) as rt:
        retried = (await rt.ops.start("fails")).execution.id
        await rt.ops.wait_for_end(retried, timeout=10)
        successor = await rt.ops.again(retried)
        rerun = (await rt.ops.start("fails")).execution.id
        await rt.ops.wait_for_end(rerun, timeout=10)
        await rt.ops.again(rerun, business_id="same")
        before = [(await rt.ops.get(i, follow_chain=False)).current for i in (retried, rerun)]
        with pytest.raises(errors.Conflict):
            await rt.ops.again(retried, business_id="same")
        with pytest.raises(errors.Conflict):
            await rt.ops.again(rerun)
        after = [(await rt.ops.get(i, follow_chain=False)).current for i in (retried, rerun)]
        runs = (await rt.ops.list_runs(limit=10)).items
        old = after[0]
    assert [r.version for r in after] == [r.version for r in before] and len(runs) == 4
    assert (old.status, old.sealed_from, old.successor_id) == ("failed", None, successor.id)


async def test_list_pages_newest_first_with_a_cursor(db: object) -> None:
    """Listing returns newest first and the cursor walks every run once."""
    ops = Operations(db, order_app())  # type: ignore[arg-type]
    ids = [(await ops.start("order", {"item": str(i), "qty": 1})).execution.id for i in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        page = await ops.list_runs(workflow="order", limit=2, cursor=cursor)
        seen += [r.id for r in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == list(reversed(ids))
    with pytest.raises(errors.InvalidInput):
        await ops.list_runs(statuses=["bogus"])


async def test_retention_janitor_deletes_expired_runs_but_not_guarded_ones(db: object) -> None:
    """Ended runs past retention go; one whose (workflow, business id) has a live run stays."""
    from tether.runtime import janitor

    ops = Operations(db, order_app())  # type: ignore[arg-type]
    gone = await ops.start("order", {"item": "a", "qty": 1}, retention=0)
    guarded = await ops.start("order", {"item": "b", "qty": 1}, retention=0, business_id="b")
    await ops.start("order", {"item": "b", "qty": 1}, business_id="b")  # live, same business id
    kept = await ops.start("order", {"item": "c", "qty": 1}, retention=3600)
    for run in (gone, guarded, kept):
        await ops.terminate(run.execution.id)
    assert await janitor.sweep(db) == 1  # type: ignore[arg-type]
    with pytest.raises(errors.ExecutionNotFound):
        await ops.get(gone.execution.id)
    await ops.get(guarded.execution.id)
    await ops.get(kept.execution.id)
