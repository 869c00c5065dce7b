"""Approvals several people decide, on a real PostgreSQL: a quorum of named approvers or of a
role, one rejection or push-back ending the round, the run's starter refused, votes shown on
the wait, in the task's statusMessage and in the history, and every vote through the one
answer path with its rules (our choice: docs/answering-waits.md)."""

from __future__ import annotations

from typing import Any

import pytest

from tether import Approval
from tether.runtime import errors, votes
from tether.runtime.context import Context
from tether.runtime.errors import Rejected
from tether.runtime.registry import App
from tether.runtime.service import Runtime
from tether.runtime.waits import Approved
from tether.storage.rows import ExecutionRow
from tether.tasks.views import task

from .conftest import Start

pytestmark = pytest.mark.postgres

APPROVERS = ["alice", "bob", "carol"]


def voting_app() -> App:
    app = App()

    async def decided(ctx: Context, **policy: Any) -> dict[str, Any]:
        try:
            got = await ctx.approval("deploy", prompt="Ship it?", inputs=["ticket"], **policy)
        except Rejected as exc:
            return {"decision": "rejected", "reason": exc.reason, "by": exc.by}
        if isinstance(got, Approved):
            return {
                "decision": "approved",
                "by": got.by,
                "approvers": list(got.approvers),
                "inputs": got.inputs,
            }
        return {"decision": "pushed_back", "by": got.by, "feedback": got.feedback}

    @app.workflow
    async def two_of_three(ctx: Context) -> dict[str, Any]:
        return await decided(ctx, approvers=APPROVERS, quorum=2)

    @app.workflow
    async def by_role(ctx: Context) -> dict[str, Any]:
        return await decided(ctx, approvers="finance", quorum=2)

    @app.workflow
    async def self_allowed(ctx: Context) -> dict[str, Any]:
        return await decided(ctx, approvers=APPROVERS, allow_self_approval=True)

    @app.workflow
    async def plain(ctx: Context) -> dict[str, Any]:
        return await decided(ctx)

    return app


async def parked(rt: Runtime, run_id: str) -> ExecutionRow:
    view = await rt.ops.wait_until(run_id, lambda r: r.status == "waiting", timeout=10)
    assert view.current.status == "waiting", view.current
    return view.current


async def started(rt: Runtime, workflow: str, by: str | None = "dave") -> ExecutionRow:
    run = await rt.ops.start(workflow, by=by)
    return await parked(rt, run.execution.id)


def approve(ticket: str = "CHG-1") -> dict[str, Any]:
    return {"decision": "approve", "ticket": ticket}


async def test_two_of_three_approvals_approve_the_gate_and_each_vote_is_shown(
    start: Start,
) -> None:
    """The first approval keeps the wait open under the same key, showing the vote on the
    wait, in the task's statusMessage and in the history; the second decides it."""
    async with start(voting_app()) as rt:
        row = await started(rt, "two_of_three")
        (wait,) = row.waits
        first = await rt.ops.answer(row.id, wait["key"], approve("CHG-1"), by="alice")
        after = (await rt.ops.get(row.id)).current
        view = task(after, after, [after], elicitation=False, poll_interval_ms=1000)
        await rt.ops.answer(row.id, wait["key"], approve("CHG-2"), by="bob")
        ended = await rt.ops.wait_for_end(row.id, timeout=10)
        history = await rt.ops.history(row.id)
    assert first.status == "accepted"
    assert after.status == "waiting" and [w["key"] for w in after.waits] == [wait["key"]]
    (shown,) = after.waits
    assert [(v["by"], v["decision"]) for v in shown[votes.VOTES]] == [("alice", "approve")]
    assert "alice approved" in view["statusMessage"]
    assert "1 of 2 approvals" in view["statusMessage"]
    assert ended.current.output == {
        "decision": "approved",
        "by": "bob",
        "approvers": ["alice", "bob"],
        "inputs": {"ticket": "CHG-2"},
    }
    cast = [(e.data["by"], e.data["decision"]) for e in history if e.type == "vote"]
    assert cast == [("alice", "approve"), ("bob", "approve")]
    assert [e.data["by"] for e in history if e.type == "answer"] == ["bob"]


async def test_one_rejection_ends_the_round_at_once(start: Start) -> None:
    """An approval then a rejection: the rejection is the gate's answer, with its reason."""
    async with start(voting_app()) as rt:
        row = await started(rt, "two_of_three")
        key = row.waits[0]["key"]
        await rt.ops.answer(row.id, key, approve(), by="alice")
        await rt.ops.answer(row.id, key, {"decision": "reject", "reason": "not today"}, by="bob")
        ended = await rt.ops.wait_for_end(row.id, timeout=10)
    assert ended.current.output == {"decision": "rejected", "reason": "not today", "by": "bob"}


async def test_one_push_back_ends_the_round_at_once(start: Start) -> None:
    async with start(voting_app()) as rt:
        row = await started(rt, "two_of_three")
        key = row.waits[0]["key"]
        await rt.ops.answer(row.id, key, {"decision": "push_back", "ticket": "redo"}, by="carol")
        ended = await rt.ops.wait_for_end(row.id, timeout=10)
    assert ended.current.output == {
        "decision": "pushed_back",
        "by": "carol",
        "feedback": {"ticket": "redo"},
    }


async def test_a_vote_from_someone_not_among_the_approvers_is_refused_naming_the_rule(
    start: Start,
) -> None:
    """The refusal is an AnswerRejected (every surface shows it) naming the approvers; the
    wait is unchanged."""
    async with start(voting_app()) as rt:
        row = await started(rt, "two_of_three")
        key = row.waits[0]["key"]
        with pytest.raises(errors.VoteRefused) as refused:
            await rt.ops.answer(row.id, key, approve(), by="mallory")
        with pytest.raises(errors.VoteRefused) as nameless:
            await rt.ops.answer(row.id, key, approve(), by=None)
        after = (await rt.ops.get(row.id)).current
    assert isinstance(refused.value, errors.AnswerRejected)
    assert refused.value.errors == [
        "mallory is not among the approvers of approval 'deploy' (alice, bob, carol)"
    ]
    assert "voter's name" in nameless.value.message
    assert after.version == row.version and after.waits == row.waits


async def test_the_person_who_started_the_run_may_not_approve_it(start: Start) -> None:
    """Separation of duties: the starter's approval is refused (their rejection is not), unless
    the approval allows self-approval."""
    async with start(voting_app()) as rt:
        row = await started(rt, "two_of_three", by="alice")
        key = row.waits[0]["key"]
        with pytest.raises(errors.VoteRefused) as refused:
            await rt.ops.answer(row.id, key, approve(), by="alice")
        unchanged = (await rt.ops.get(row.id)).current
        allowed = await started(rt, "self_allowed", by="alice")
        await rt.ops.answer(allowed.id, allowed.waits[0]["key"], approve(), by="alice")
        approved = await rt.ops.wait_for_end(allowed.id, timeout=10)
        await rt.ops.answer(row.id, key, {"decision": "reject", "reason": "mine"}, by="alice")
        rejected = await rt.ops.wait_for_end(row.id, timeout=10)
    assert refused.value.errors == [
        "alice started this run and may not approve it (approval 'deploy' does not allow "
        "self-approval)"
    ]
    assert unchanged.version == row.version
    assert approved.current.output["approvers"] == ["alice"]
    assert rejected.current.output["decision"] == "rejected"


async def test_a_plain_approval_keeps_first_answer_wins_without_votes(start: Start) -> None:
    """Without approvers, a quorum or allow_self_approval, nobody is refused (the starter
    approves) and no vote is recorded."""
    async with start(voting_app()) as rt:
        row = await started(rt, "plain", by="alice")
        await rt.ops.answer(row.id, row.waits[0]["key"], approve(), by="alice")
        ended = await rt.ops.wait_for_end(row.id, timeout=10)
        history = await rt.ops.history(row.id)
    assert votes.POLICY not in row.waits[0]
    assert ended.current.output["decision"] == "approved"
    assert ended.current.output["approvers"] == []
    assert not [e for e in history if e.type == "vote"]


async def test_a_voters_repeat_is_a_no_op_and_a_change_of_mind_a_conflict(
    start: Start,
) -> None:
    """Per voter, first vote wins: the same vote again is a duplicate (open or decided); a
    different one is a conflict; after the decision anyone else's vote is a conflict."""
    async with start(voting_app()) as rt:
        row = await started(rt, "two_of_three")
        key = row.waits[0]["key"]
        await rt.ops.answer(row.id, key, approve(), by="alice")
        again = await rt.ops.answer(row.id, key, approve(), by="alice")
        with pytest.raises(errors.AnswerConflict):
            await rt.ops.answer(row.id, key, {"decision": "reject"}, by="alice")
        await rt.ops.answer(row.id, key, approve(), by="bob")
        await rt.ops.wait_for_end(row.id, timeout=10)
        repeat_after = await rt.ops.answer(row.id, key, approve(), by="alice")
        with pytest.raises(errors.AnswerConflict):
            await rt.ops.answer(row.id, key, approve(), by="carol")
        history = await rt.ops.history(row.id)
    assert (again.status, repeat_after.status) == ("duplicate", "duplicate")
    assert [e.data["by"] for e in history if e.type == "vote"] == ["alice", "bob"]


async def test_votes_carry_over_when_the_run_parks_again_under_a_new_key(start: Start) -> None:
    """A signal wakes the run while one vote is in: it parks again under a new key, still
    showing the vote, which still counts, and its voter's repeat is still a duplicate."""
    app = App()

    @app.workflow
    async def poked(ctx: Context) -> list[str]:
        await ctx.wait_for_signal("first")
        got = await ctx.approval("deploy", approvers=APPROVERS, quorum=2)
        assert isinstance(got, Approved)
        return list(got.approvers)

    async with start(app) as rt:
        run = await rt.ops.start("poked", by="dave")
        await parked(rt, run.execution.id)
        await rt.ops.signal(run.execution.id, "first", None)
        row = await rt.ops.wait_until(
            run.execution.id,
            lambda r: r.status == "waiting" and r.waits[0]["kind"] == "approval",
            timeout=10,
        )
        first_key = row.current.waits[0]["key"]
        await rt.ops.answer(row.current.id, first_key, approve(), by="alice")
        await rt.ops.signal(row.current.id, "unrelated", None)  # wakes it: parks anew
        moved = await rt.ops.wait_until(
            row.current.id,
            lambda r: r.status == "waiting" and r.waits[0]["key"] != first_key,
            timeout=10,
        )
        (wait,) = moved.current.waits
        repeat = await rt.ops.answer(row.current.id, wait["key"], approve(), by="alice")
        await rt.ops.answer(row.current.id, wait["key"], approve(), by="carol")
        ended = await rt.ops.wait_for_end(row.current.id, timeout=10)
    assert [v["by"] for v in wait[votes.VOTES]] == ["alice"]
    assert repeat.status == "duplicate"
    assert ended.current.output == ["alice", "carol"]


async def test_a_role_names_who_may_vote(start: Start) -> None:
    """`approvers="finance"`: the members of that role (TETHER_APPROVER_ROLES) vote; anyone
    else is refused, naming the role."""
    roles = {"finance": frozenset({"dan", "erin"})}
    async with start(voting_app(), approver_roles=roles) as rt:
        row = await started(rt, "by_role", by="zed")
        key = row.waits[0]["key"]
        with pytest.raises(errors.VoteRefused) as refused:
            await rt.ops.answer(row.id, key, approve(), by="alice")
        await rt.ops.answer(row.id, key, approve("A"), by="dan")
        await rt.ops.answer(row.id, key, approve("B"), by="erin")
        ended = await rt.ops.wait_for_end(row.id, timeout=10)
    assert refused.value.errors == [
        "alice is not in role 'finance', whose members approve 'deploy'"
    ]
    assert ended.current.output["approvers"] == ["dan", "erin"]
    assert ended.current.output["inputs"] == {"ticket": "B"}  # the later approve's inputs


async def test_a_quorum_asked_of_fewer_approvers_than_it_needs_is_refused() -> None:
    """The workflow's own mistake: refused where the approval is made."""
    with pytest.raises(ValueError, match="quorum 3 is more than the 2 approvers"):
        Approval("x", approvers=["a", "b"], quorum=3)
    with pytest.raises(ValueError, match="twice"):
        Approval("x", approvers=["a", "a"])
    with pytest.raises(ValueError, match="whole number"):
        Approval("x", quorum=0)


async def test_a_later_round_of_the_same_approval_starts_with_no_votes(start: Start) -> None:
    """The votes of a decided round go with its answer: the next approval of that name shows
    none, and the same people vote again."""
    app = App()

    @app.workflow
    async def rounds(ctx: Context) -> list[list[str]]:
        seen = []
        for _ in range(2):
            got = await ctx.approval("deploy", approvers=APPROVERS, quorum=2)
            assert isinstance(got, Approved)
            seen.append(list(got.approvers))
        return seen

    async with start(app) as rt:
        row = await started(rt, "rounds")
        first = row.waits[0]["key"]
        await rt.ops.answer(row.id, first, approve(), by="alice")
        await rt.ops.answer(row.id, first, approve(), by="bob")
        second = await rt.ops.wait_until(
            row.id, lambda r: r.status == "waiting" and r.waits[0]["key"] != first, timeout=10
        )
        (wait,) = second.current.waits
        await rt.ops.answer(row.id, wait["key"], approve(), by="bob")
        await rt.ops.answer(row.id, wait["key"], approve(), by="alice")
        ended = await rt.ops.wait_for_end(row.id, timeout=10)
    assert wait[votes.VOTES] == []
    assert ended.current.output == [["alice", "bob"], ["bob", "alice"]]
