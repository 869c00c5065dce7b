"""Programmatic answers in WorkflowEnvironment: each helper answers through the runtime's one
answer path (the same checks and records as every surface), after waiting for the wait."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import tether
from tether.testing import (
    AnswerConflict,
    AnswerRejected,
    RunEnded,
    RunFailed,
    WaitNotOpen,
    WaitTimedOut,
    WorkflowEnvironment,
)

pytestmark = pytest.mark.postgres


class Expense(BaseModel):
    amount: int
    note: str


class Verdict(BaseModel):
    ok: bool


def gates_app() -> tether.App:
    app = tether.App()

    @app.workflow
    async def gate(ctx: tether.Context) -> dict[str, Any]:
        decision = await ctx.approval("ship", inputs=["ticket"], required=["ticket"])
        if isinstance(decision, tether.PushedBack):
            return {"pushed_back": decision.feedback, "by": decision.by}
        return {"approved": decision.inputs, "by": decision.by}

    @app.workflow
    async def form(ctx: tether.Context) -> dict[str, Any]:
        filled = await ctx.human_task("expense", form=Expense)
        if isinstance(filled, tether.PushedBack):
            return {"pushed_back": filled.feedback}
        return {"completed": filled.values.model_dump()}

    @app.workflow
    async def listener(ctx: tether.Context) -> list[Any]:
        first = await ctx.wait_for_signal("poke")
        second = await ctx.wait_for_signal("poke")
        return [first, second]

    @app.workflow
    async def agent(ctx: tether.Context) -> bool:
        verdict = await ctx.agent_step("judge", schema=Verdict)
        return verdict.ok

    return app


async def test_approve_gives_the_workflow_its_inputs_and_records_the_answer() -> None:
    """approve waits for the approval, answers it with its inputs; history records the
    answer under the wait's key, by the environment's `by`."""
    async with WorkflowEnvironment(gates_app()) as env:
        run = await env.start("gate")
        key = await env.approve(run, "ship", inputs={"ticket": "CHG-1"})
        assert await env.result(run) == {"approved": {"ticket": "CHG-1"}, "by": "test"}
        answers = [e.data for e in await env.history(run) if e.type == "answer"]
    assert answers == [{"key": key, "by": "test"}]
    assert key.startswith(f"{run}:approval:ship:")


async def test_an_answer_that_does_not_fit_is_refused_and_changes_nothing() -> None:
    """Approving without the required ticket raises AnswerRejected (the wait's own check)
    and the wait stays open under the same key."""
    async with WorkflowEnvironment(gates_app()) as env:
        run = await env.start("gate")
        (before,) = await env.wait_until_waiting(run, "ship")
        with pytest.raises(AnswerRejected):
            await env.approve(run, "ship")
        (after,) = await env.wait_until_waiting(run, "ship")
        assert after.key == before.key
        assert [e.type for e in await env.history(run)] == ["created"]


async def test_a_different_second_answer_to_the_same_wait_is_a_conflict() -> None:
    """The first answer wins; answering the same key differently is refused, identically
    is a no-op (the one answer path's rules)."""
    async with WorkflowEnvironment(gates_app()) as env:
        run = await env.start("gate")
        key = await env.approve(run, "ship", {"ticket": "CHG-1"})
        assert await env.answer(run, key, {"decision": "approve", "ticket": "CHG-1"}) == key
        with pytest.raises(AnswerConflict):
            await env.answer(run, key, {"decision": "approve", "ticket": "CHG-2"})
        assert (await env.result(run))["approved"] == {"ticket": "CHG-1"}


async def test_reject_fails_the_run_with_the_reason() -> None:
    """reject makes ctx.approval raise Rejected; uncaught, the run fails with the reason."""
    async with WorkflowEnvironment(gates_app()) as env:
        run = await env.start("gate")
        await env.reject(run, "ship", reason="not this week")
        with pytest.raises(RunFailed) as failed:
            await env.result(run)
    assert failed.value.status == "failed"
    assert failed.value.error["kind"] == "rejected"
    assert failed.value.error["reason"] == "not this week"


async def test_push_back_hands_the_workflow_the_feedback() -> None:
    """push_back answers an approval with PushedBack and its feedback, by another `by`."""
    async with WorkflowEnvironment(gates_app()) as env:
        run = await env.start("gate")
        await env.push_back(run, "ship", {"why": "too big"}, by="reviewer")
        assert await env.result(run) == {"pushed_back": {"why": "too big"}, "by": "reviewer"}


async def test_complete_human_task_takes_a_model_instance() -> None:
    """complete_human_task fills the form from a model; the workflow gets Completed."""
    async with WorkflowEnvironment(gates_app()) as env:
        run = await env.start("form")
        await env.complete_human_task(run, "expense", Expense(amount=12, note="taxi"))
        assert await env.result(run) == {"completed": {"amount": 12, "note": "taxi"}}


async def test_a_human_task_can_be_pushed_back() -> None:
    """push_back on a human task gives the workflow PushedBack with the fields sent."""
    async with WorkflowEnvironment(gates_app()) as env:
        run = await env.start("form")
        await env.push_back(run, "expense", {"missing": "receipt"})
        assert await env.result(run) == {"pushed_back": {"missing": "receipt"}}


async def test_signals_sent_early_are_kept_and_later_ones_answer_the_open_wait() -> None:
    """A signal sent before the run waits is buffered for it; the next answers the open wait."""
    async with WorkflowEnvironment(gates_app()) as env:
        run = await env.start("listener")
        await env.signal(run, "poke", {"n": 1})
        await env.wait_until_waiting(run, "poke")
        await env.signal(run, "poke", {"n": 2})
        assert await env.result(run) == [{"n": 1}, {"n": 2}]
        assert "answer" in [e.type for e in await env.history(run)]


async def test_answer_answers_an_agent_step_checked_against_its_schema() -> None:
    """answer is the raw path: an agent step's answer must fit its schema."""
    async with WorkflowEnvironment(gates_app()) as env:
        run = await env.start("agent")
        with pytest.raises(AnswerRejected):
            await env.answer(run, "judge", {"ok": "maybe"})
        await env.answer(run, "judge", {"ok": True})
        assert await env.result(run) is True


async def test_waiting_for_a_wait_of_an_ended_run_raises_run_ended() -> None:
    """An answer for a run that ended before the wait opened raises RunEnded."""
    async with WorkflowEnvironment(gates_app()) as env:
        run = await env.start("agent")
        await env.answer(run, "judge", {"ok": False})
        await env.result(run)
        with pytest.raises(RunEnded):
            await env.approve(run, "ship")


async def test_a_wait_that_never_opens_times_out_naming_the_open_waits() -> None:
    """Waiting for a wait the run does not open gives up after the timeout and says which
    waits are open."""
    async with WorkflowEnvironment(gates_app()) as env:
        run = await env.start("gate")
        with pytest.raises(WaitTimedOut, match="approval 'ship'"):
            await env.wait_until_waiting(run, "elsewhere", timeout=0.5)


async def test_a_key_that_is_not_open_is_refused_naming_the_open_ones() -> None:
    """Answering by a key no open wait has raises WaitNotOpen with the keys open now; the
    refusal is the kit's class, and the runtime's answer is unchanged."""
    async with WorkflowEnvironment(gates_app()) as env:
        run = await env.start("gate")
        (ship,) = await env.wait_until_waiting(run, "ship")
        with pytest.raises(WaitNotOpen) as refused:
            await env.answer(run, f"{run}:approval:elsewhere:1", {"decision": "approve"})
        assert refused.value.open_waits == (ship.key,)
        with pytest.raises(AnswerRejected) as rejected:
            await env.approve(run, "ship", {"ticket": ""})
        assert rejected.value.violations == ("ticket: required to approve",)


async def test_a_role_quorum_approval_is_decided_by_its_members_votes() -> None:
    """`approver_roles` gives the environment's roles their members, as TETHER_APPROVER_ROLES
    does a server; each member's approve is a vote, an outsider's is refused."""
    app = tether.App()

    @app.workflow
    async def pay(ctx: tether.Context) -> list[str]:
        got = await ctx.approval("pay", approvers="finance", quorum=2)
        assert isinstance(got, tether.Approved)
        return list(got.approvers)

    roles = {"finance": ["dan", "erin"]}
    async with WorkflowEnvironment(app, approver_roles=roles) as env:
        run = await env.start("pay")
        await env.approve(run, "pay", by="dan")
        with pytest.raises(AnswerRejected, match="not in role 'finance'"):
            await env.approve(run, "pay", by="zed")
        await env.approve(run, "pay", by="erin")
        assert await env.result(run) == ["dan", "erin"]
