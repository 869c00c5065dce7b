"""Waits on a real PostgreSQL: signals, approvals, human tasks, keys, idempotent answers."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tether.runtime import errors
from tether.runtime.context import Context
from tether.runtime.registry import App
from tether.runtime.service import Runtime
from tether.runtime.waits import Approved, Completed, PushedBack, parse_key
from tether.storage.rows import ExecutionRow

from .conftest import Start

pytestmark = pytest.mark.postgres


async def parked(rt: Runtime, execution_id: str, n_waits: int = 1) -> ExecutionRow:
    view = await rt.ops.wait_until(
        execution_id, lambda r: r.status == "waiting" and len(r.waits) == n_waits, timeout=10
    )
    assert view.current.status == "waiting", view.current
    return view.current


class Payload(BaseModel):
    amount: int


def signal_app() -> App:
    app = App()

    @app.workflow
    async def waiter(ctx: Context) -> int:
        first: Payload = await ctx.wait_for_signal("go", schema=Payload, prompt="How much?")
        return first.amount

    return app


async def test_a_signal_sent_before_the_wait_opens_is_buffered_not_lost(start: Start) -> None:
    """An early signal is kept in the buffer and consumed when the wait opens."""
    app = App()

    @app.workflow
    async def late(ctx: Context) -> int:
        await ctx.wait_for_signal("first")  # while it waits here, "go" has no open wait
        value: Payload = await ctx.wait_for_signal("go", schema=Payload)
        return value.amount

    async with start(app) as rt:
        started = await rt.ops.start("late")
        run_id = started.execution.id
        await parked(rt, run_id)
        res = await rt.ops.signal(run_id, "go", {"amount": 7})
        buffered = await rt.ops.buffered_signals(run_id, "go")
        await rt.ops.signal(run_id, "first", {})
        view = await rt.ops.wait_for_end(run_id, timeout=10)
    assert res.status == "accepted"
    assert [b.payload for b in buffered] == [{"amount": 7}]
    assert view.current.output == 7


async def test_parked_run_exposes_one_open_wait_with_its_key(start: Start) -> None:
    """The wait descriptor carries key {id}:{kind}:{name}:{n}, prompt and schema."""
    async with start(signal_app()) as rt:
        started = await rt.ops.start("waiter")
        row = await parked(rt, started.execution.id)
    (wait,) = row.waits
    parts = parse_key(wait["key"])
    assert parts is not None
    assert (parts.execution_id, parts.kind, parts.name, parts.n) == (
        row.id,
        "signal",
        "go",
        row.last_event_id,
    )
    assert wait["prompt"] == "How much?"
    assert wait["schema"]["properties"]["amount"]["type"] == "integer"


async def test_an_unrelated_event_while_parked_rekeys_the_wait(start: Start) -> None:
    """A signal for another name makes the run re-park: the old key is no longer open."""
    async with start(signal_app()) as rt:
        started = await rt.ops.start("waiter")
        before = await parked(rt, started.execution.id)
        await rt.ops.signal(started.execution.id, "unrelated", {"x": 1})
        after = await rt.ops.wait_until(
            started.execution.id,
            lambda r: (
                r.status == "waiting"
                and bool(r.waits)
                and r.waits[0]["key"] != before.waits[0]["key"]
            ),
            timeout=10,
        )
        with pytest.raises(errors.WaitNotOpen):
            await rt.ops.answer(started.execution.id, before.waits[0]["key"], {"amount": 1})
        ans = await rt.ops.answer(
            started.execution.id, after.current.waits[0]["key"], {"amount": 2}
        )
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
    assert ans.status == "accepted"
    assert view.current.output == 2


async def test_answers_are_idempotent_by_key(start: Start) -> None:
    """First answer wins; an identical repeat is a no-op; a different one is a conflict."""
    async with start(signal_app()) as rt:
        started = await rt.ops.start("waiter")
        row = await parked(rt, started.execution.id)
        key = row.waits[0]["key"]
        first = await rt.ops.answer(row.id, key, {"amount": 5})
        again = await rt.ops.answer(row.id, key, {"amount": 5})
        with pytest.raises(errors.AnswerConflict):
            await rt.ops.answer(row.id, key, {"amount": 6})
        view = await rt.ops.wait_for_end(row.id, timeout=10)
        late_repeat = await rt.ops.answer(row.id, key, {"amount": 5})
    assert (first.status, again.status, late_repeat.status) == (
        "accepted",
        "duplicate",
        "duplicate",
    )
    assert view.current.output == 5


async def test_an_answer_that_does_not_fit_the_schema_is_refused_and_changes_nothing(
    start: Start,
) -> None:
    """AnswerRejected names the problem; the row's version and waits are untouched."""
    async with start(signal_app()) as rt:
        started = await rt.ops.start("waiter")
        row = await parked(rt, started.execution.id)
        with pytest.raises(errors.AnswerRejected) as info:
            await rt.ops.answer(row.id, row.waits[0]["key"], {"amount": "lots"})
        after = (await rt.ops.get(row.id)).current
    assert info.value.errors and "amount" in info.value.errors[0]
    assert (after.version, after.waits, after.status) == (row.version, row.waits, "waiting")


async def test_malformed_or_foreign_keys_are_not_open(start: Start) -> None:
    """Keys that do not parse, or name another run, raise WaitNotOpen."""
    async with start(signal_app()) as rt:
        started = await rt.ops.start("waiter")
        row = await parked(rt, started.execution.id)
        for bad in (
            "nope",
            f"other:{row.waits[0]['key'].split(':', 1)[1]}",
            row.waits[0]["key"] + "0",
        ):
            with pytest.raises(errors.WaitNotOpen):
                await rt.ops.answer(row.id, bad, {"amount": 1})


def approval_app() -> App:
    app = App()

    @app.workflow
    async def gate(ctx: Context) -> dict[str, object]:
        rounds = 0
        while True:
            rounds += 1
            decision = await ctx.approval(
                "publish", prompt="Ship it?", inputs=["ticket", "note"], required=["ticket"]
            )
            if isinstance(decision, Approved):
                return {"rounds": rounds, "ticket": decision.inputs["ticket"]}
            assert isinstance(decision, PushedBack)

    return app


async def test_approval_push_back_loops_until_approved(start: Start) -> None:
    """push_back returns feedback and the gate opens again under a new key; approve ends it."""
    async with start(approval_app()) as rt:
        started = await rt.ops.start("gate")
        first = await parked(rt, started.execution.id)
        await rt.ops.answer(
            first.id, first.waits[0]["key"], {"decision": "push_back", "note": "fix typo"}
        )
        second = await rt.ops.wait_until(
            first.id,
            lambda r: r.status == "waiting" and r.waits[0]["key"] != first.waits[0]["key"],
            timeout=10,
        )
        with pytest.raises(errors.AnswerRejected):  # ticket is required to approve
            await rt.ops.answer(first.id, second.current.waits[0]["key"], {"decision": "approve"})
        await rt.ops.answer(
            first.id, second.current.waits[0]["key"], {"decision": "approve", "ticket": "CHG-1"}
        )
        view = await rt.ops.wait_for_end(first.id, timeout=10)
    assert view.current.output == {"rounds": 2, "ticket": "CHG-1"}


async def test_reject_ends_the_run_failed_with_the_reason(start: Start) -> None:
    """An uncaught rejection ends the run failed, error kind 'rejected' with reason and gate."""
    async with start(approval_app()) as rt:
        started = await rt.ops.start("gate")
        row = await parked(rt, started.execution.id)
        await rt.ops.answer(
            row.id, row.waits[0]["key"], {"decision": "reject", "reason": "no"}, by="ann"
        )
        view = await rt.ops.wait_for_end(row.id, timeout=10)
    err = view.current.error
    assert view.current.status == "failed"
    assert (err["kind"], err["gate"], err["reason"], err["by"]) == (
        "rejected",
        "publish",
        "no",
        "ann",
    )


class Form(BaseModel):
    title: str
    pages: int


async def test_human_task_with_invalid_form_input_is_refused_without_change(start: Start) -> None:
    """Form values that do not fit are refused (row unchanged); valid values complete it."""
    app = App()

    @app.workflow
    async def form(ctx: Context) -> dict[str, object]:
        result = await ctx.human_task("fill", form=Form, prompt="Describe the book")
        assert isinstance(result, Completed)
        return {"title": result.values.title, "pages": result.values.pages, "by": result.by}

    async with start(app) as rt:
        started = await rt.ops.start("form")
        row = await parked(rt, started.execution.id)
        key = row.waits[0]["key"]
        for bad in ({"title": "x"}, {"title": "x", "pages": "many"}, {"decision": "maybe"}, [1]):
            with pytest.raises(errors.AnswerRejected):
                await rt.ops.answer(row.id, key, bad)
        unchanged = (await rt.ops.get(row.id)).current
        assert unchanged.version == row.version
        await rt.ops.answer(row.id, key, {"title": "Dune", "pages": 412}, by="bob")
        view = await rt.ops.wait_for_end(row.id, timeout=10)
    assert view.current.output == {"title": "Dune", "pages": 412, "by": "bob"}


async def test_two_waits_at_once_answered_one_by_one(start: Start) -> None:
    """wait_all keeps a partial answer; only the other wait stays open; both complete it."""
    app = App()

    @app.workflow
    async def both(ctx: Context) -> list[object]:
        from tether.runtime.waits import Signal

        return await ctx.wait_all(Signal("left"), Signal("right"))

    async with start(app) as rt:
        started = await rt.ops.start("both")
        row = await parked(rt, started.execution.id, n_waits=2)
        left = next(w for w in row.waits if w["name"] == "left")
        await rt.ops.answer(row.id, left["key"], "L")
        one = await rt.ops.wait_until(
            row.id, lambda r: r.status == "waiting" and len(r.waits) == 1, timeout=10
        )
        assert one.current.waits[0]["name"] == "right"
        await rt.ops.answer(row.id, one.current.waits[0]["key"], "R")
        view = await rt.ops.wait_for_end(row.id, timeout=10)
    assert view.current.output == ["L", "R"]


async def test_wait_any_goes_on_with_the_first_answer_and_offers_the_rest_again(
    start: Start,
) -> None:
    """wait_any wakes the run at one answer (the workflow sees it before the other), and the
    unanswered wait is open again under a new key; an answer to its old key is not open."""
    app = App()

    @app.workflow
    async def either(ctx: Context) -> list[dict[str, object]]:
        from tether.runtime.waits import Signal

        seen = [await ctx.wait_any(Signal("left"), Signal("right"))]
        seen.append(await ctx.wait_any(Signal("right")))
        return seen

    async with start(app) as rt:
        started = await rt.ops.start("either")
        row = await parked(rt, started.execution.id, n_waits=2)
        keys = {w["name"]: w["key"] for w in row.waits}
        await rt.ops.answer(row.id, keys["left"], "L")
        again = await rt.ops.wait_until(
            row.id,
            lambda r: r.status == "waiting" and r.last_event_id > row.last_event_id,
            timeout=10,
        )
        (right,) = again.current.waits
        assert right["name"] == "right" and right["key"] != keys["right"]
        with pytest.raises(errors.WaitNotOpen):
            await rt.ops.answer(row.id, keys["right"], "R")
        await rt.ops.answer(row.id, right["key"], "R")
        view = await rt.ops.wait_for_end(row.id, timeout=10)
    assert view.current.output == [{"signal:left": "L"}, {"signal:right": "R"}]


async def test_a_wait_timeout_raises_wait_timeout_in_the_workflow(start: Start) -> None:
    """With a timeout and no answer, the workflow gets WaitTimeout and may carry on."""
    app = App()

    @app.workflow
    async def patient(ctx: Context) -> str:
        try:
            await ctx.wait_for_signal("go", timeout=0.2)
        except errors.WaitTimeout:
            return "timed out"
        return "answered"

    async with start(app) as rt:
        started = await rt.ops.start("patient")
        view = await rt.ops.wait_for_end(started.execution.id, timeout=10)
    assert view.current.output == "timed out"


async def test_agent_step_answer_must_match_its_schema(start: Start) -> None:
    """An agent step's answer is validated against its schema before admission."""
    app = App()

    class Summary(BaseModel):
        text: str
        score: float

    @app.workflow
    async def agent(ctx: Context) -> float:
        got = await ctx.agent_step("summarise", schema=Summary, prompt="Summarise the doc")
        return got.score

    async with start(app) as rt:
        started = await rt.ops.start("agent")
        row = await parked(rt, started.execution.id)
        with pytest.raises(errors.AnswerRejected):
            await rt.ops.answer(row.id, row.waits[0]["key"], {"text": "ok"})
        await rt.ops.answer(row.id, row.waits[0]["key"], {"text": "ok", "score": 0.5})
        view = await rt.ops.wait_for_end(row.id, timeout=10)
    assert view.current.output == 0.5
