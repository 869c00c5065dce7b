"""Approval gates, human tasks and sub-DAG calls, answered through the one `answer` path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from tether.runtime import errors
from tether.runtime.dag.status import dag_status
from tether.runtime.registry import App
from tether.runtime.service import Runtime
from tether.storage.rows import ExecutionRow

from .conftest import Start
from .test_run import node_results

pytestmark = pytest.mark.postgres


async def parked_on(rt: Runtime, run_id: str, kind: str, name: str) -> dict[str, Any]:
    """The open wait of that kind and name once the run parks on it."""

    def has(row: ExecutionRow) -> bool:
        return row.status == "waiting" and any(
            w["kind"] == kind and w["name"] == name for w in row.waits
        )

    view = await rt.ops.wait_until(run_id, has, timeout=20)
    assert has(view.current), view.current
    return next(w for w in view.current.waits if w["name"] == name)


GATED = """
name: gated
steps:
  - name: build
    command: "echo build-$DAG_PUSHBACK_ITERATION-${NOTE} >> {log}"
  - name: publish
    command: "echo publish >> {log}"
    depends: build
    approval:
      prompt: Publish?
      input: [TICKET, NOTE]
      required: [TICKET]
      rewind_to: build
  - name: after
    command: "echo after-${TICKET}${EXTRA} >> {log}"
    output: DONE
    depends: publish
"""


def gated_app(log: Path) -> App:
    app = App()
    app.dag(GATED.replace("{log}", str(log)))
    return app


async def test_approve_passes_inputs_downstream(start: Start, tmp_path: Path) -> None:
    """The step runs, then waits; approve with inputs (listed or not): they reach later steps
    as env vars."""
    log = tmp_path / "log"
    async with start(gated_app(log)) as rt:
        run = (await rt.ops.start("gated", {})).execution.id
        gate = await parked_on(rt, run, "approval", "publish")
        assert log.read_text().split() == ["build--", "publish"]
        assert (gate["prompt"], gate["inputs"], gate["required"]) == (
            "Publish?",
            ["TICKET", "NOTE"],
            ["TICKET"],
        )
        with pytest.raises(errors.AnswerRejected):
            await rt.ops.answer(run, gate["key"], {"decision": "approve", "TICKET": "  "})
        approval = {"decision": "approve", "TICKET": "T-1", "EXTRA": "+x"}  # EXTRA: not listed
        await rt.ops.answer(run, gate["key"], approval, by="ann")
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert row.status == "completed", row.error
    # Dagu keeps an input the gate does not list, as an output like the others
    assert log.read_text().split() == ["build--", "publish", "after-T-1+x"]


async def test_reject_ends_the_run_rejected_with_the_reason(start: Start, tmp_path: Path) -> None:
    """Reject: the step and the run are rejected, the reason kept; nothing downstream runs."""
    log = tmp_path / "log"
    async with start(gated_app(log)) as rt:
        run = (await rt.ops.start("gated", {})).execution.id
        gate = await parked_on(rt, run, "approval", "publish")
        await rt.ops.answer(run, gate["key"], {"decision": "reject", "reason": "not today"}, by="b")
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert row.status == "failed"
    assert (row.error["kind"], row.error["gate"], row.error["reason"], row.error["by"]) == (
        "rejected",
        "publish",
        "not today",
        "b",
    )
    assert "after" not in log.read_text()


async def test_a_rejection_ends_the_run_in_the_answers_own_write(
    start: Start, tmp_path: Path
) -> None:
    """Dagu writes the rejected step and run at once: when the answer returns, the run has
    ended rejected (one `ended` event, counted as a failed run), and its detail shows the
    gate rejected, no replay needed; a repeat is a no-op, another answer a conflict."""
    log = tmp_path / "log"
    async with start(gated_app(log)) as rt:
        run = (await rt.ops.start("gated", {})).execution.id
        gate = await parked_on(rt, run, "approval", "publish")
        reject = {"decision": "reject", "reason": "not today"}
        ended = ("tether_runs_ended_total", {"workflow": "gated", "status": "failed"})
        before = REGISTRY.get_sample_value(*ended) or 0.0
        await rt.ops.answer(run, gate["key"], reject, by="b")
        row = (await rt.ops.get(run)).current
        assert REGISTRY.get_sample_value(*ended) == before + 1
        steps = await rt.ops.steps(run)
        history = await rt.ops.history(run)
        assert (await rt.ops.answer(run, gate["key"], reject)).status == "duplicate"
        with pytest.raises(errors.AnswerConflict):
            await rt.ops.answer(run, gate["key"], {"decision": "approve", "TICKET": "T"})
    assert (row.status, row.error["kind"], row.error["reason"], row.error["by"]) == (
        "failed",
        "rejected",
        "not today",
        "b",
    )
    assert row.ended_at is not None and row.waits == []
    assert [e.type for e in history].count("ended") == 1
    detail = dag_status(row, steps)
    assert (detail.status, detail.status_label, detail.finished_at) == (8, "rejected", row.ended_at)
    publish = next(s for s in detail.steps if s.name == "publish")
    assert (publish.status_label, publish.decision) == (
        "rejected",
        {"decision": "reject", "by": "b", "reason": "not today"},
    )
    assert "after" not in log.read_text()


async def test_push_back_rewinds_and_reruns_with_feedback(start: Start, tmp_path: Path) -> None:
    """Push back: rewind_to and everything downstream run again with the feedback as env vars
    and DAG_PUSHBACK_ITERATION; then approval goes on as usual."""
    log = tmp_path / "log"
    async with start(gated_app(log)) as rt:
        run = (await rt.ops.start("gated", {})).execution.id
        gate = await parked_on(rt, run, "approval", "publish")
        await rt.ops.answer(run, gate["key"], {"decision": "push_back", "NOTE": "fix"})
        again = await parked_on(rt, run, "approval", "publish")
        assert again["key"] != gate["key"]
        assert log.read_text().split() == ["build--", "publish", "build-1-fix", "publish"]
        await rt.ops.answer(run, again["key"], {"decision": "approve", "TICKET": "T-2"})
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert row.status == "completed", row.error
    assert log.read_text().split()[-1] == "after-T-2"


TASK = """
name: review
steps:
  - name: draft
    command: echo draft
  - id: check
    action: human.task
    depends: draft
    with:
      prompt: Review the draft
      form:
        type: object
        required: [score]
        properties:
          score: {type: integer, minimum: 1, maximum: 5}
          verdict: {enum: [ok, redo], default: ok}
          ratio: {type: number}
          note: {type: string, minLength: 2, maxLength: 4, pattern: "^[a-z]+$"}
          urgent: {type: boolean}
      push_back:
        rewind_to: draft
        form:
          type: object
          properties:
            why: {type: string}
  - name: use
    command: echo "score=${steps.check.outputs.score} verdict=${steps.check.outputs.verdict}"
    output: USED
    depends: check
"""

BAD_ANSWERS = [
    ({"score": "3"}, "string is not an integer"),
    ({"score": 3.0}, "3.0 is not an integer (no coercion)"),
    ({"score": True}, "a boolean is not an integer"),
    ({"score": 2**63}, "outside int64"),
    ({"score": 0}, "below minimum"),
    ({"score": 6}, "above maximum"),
    ({}, "required field missing"),
    ({"score": 3, "verdict": "maybe"}, "not in enum"),
    ({"score": 3, "ratio": "1.5"}, "string is not a number"),
    ({"score": 3, "ratio": False}, "boolean is not a number"),
    ({"score": 3, "note": "a"}, "shorter than minLength"),
    ({"score": 3, "note": "abcde"}, "longer than maxLength"),
    ({"score": 3, "note": "AB"}, "does not match pattern"),
    ({"score": 3, "urgent": "yes"}, "string is not a boolean"),
    ({"score": 3, "extra": 1}, "undeclared field with additionalProperties false"),
    ({"decision": "push_back", "why": 3}, "feedback of the wrong type"),
    ({"decision": "push_back", "other": "x"}, "undeclared feedback field"),
]


async def test_human_task_form_follows_the_scalar_rules(start: Start) -> None:
    """Every scalar rule of a form is checked when the task is answered; a refused answer
    changes nothing; then a good answer publishes the outputs (defaults included)."""
    app = App()
    app.dag(TASK)
    async with start(app) as rt:
        run = (await rt.ops.start("review", {})).execution.id
        task = await parked_on(rt, run, "human_task", "check")
        assert task["prompt"] == "Review the draft"
        for answer, why in BAD_ANSWERS:
            with pytest.raises(errors.AnswerRejected):
                await rt.ops.answer(run, task["key"], answer)
                pytest.fail(f"accepted: {why}")
        good = {"score": 4, "ratio": 1, "note": "ok", "urgent": False}
        await rt.ops.answer(run, task["key"], {"decision": "complete", **good})
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert row.status == "completed", row.error
    assert row.output["outputs"]["USED"] == "score=4 verdict=ok"


async def test_enum_compares_numbers_numerically(start: Start) -> None:
    """Enum values compare numerically (1 = 1.0), never a boolean with a number."""
    app = App()
    app.dag(
        """
name: pick
steps:
  - id: pick
    action: human.task
    with:
      prompt: Pick
      form:
        type: object
        properties:
          n: {type: number, enum: [1, 2.5]}
"""
    )
    async with start(app) as rt:
        run = (await rt.ops.start("pick", {})).execution.id
        task = await parked_on(rt, run, "human_task", "pick")
        with pytest.raises(errors.AnswerRejected):
            await rt.ops.answer(run, task["key"], {"n": True})
        await rt.ops.answer(run, task["key"], {"n": 1.0})
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert row.status == "completed", row.error


async def test_human_task_push_back_reruns_upstream(start: Start) -> None:
    """A task's push-back rewinds to its upstream step, which runs again; the task reopens."""
    app = App()
    app.dag(TASK)
    async with start(app) as rt:
        run = (await rt.ops.start("review", {})).execution.id
        task = await parked_on(rt, run, "human_task", "check")
        await rt.ops.answer(run, task["key"], {"decision": "push_back", "why": "short"})
        again = await parked_on(rt, run, "human_task", "check")
        assert again["key"] != task["key"]
        await rt.ops.answer(run, again["key"], {"score": 5})
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
        steps = await rt.ops.steps(run)
    assert row.status == "completed", row.error
    drafts = [r for r in steps if r.name == "node:draft"]
    assert len(drafts) == 2


async def test_call_runs_a_sub_dag_with_its_own_id(start: Start) -> None:
    """`call:` starts the child DAG as its own run and waits for its end; outputs come back."""
    app = App()
    app.dag(
        """
name: child
params: "X=0"
steps:
  - name: twice
    command: echo $((X * 2))
    output: TWICE
"""
    )
    app.dag(
        """
name: parent
steps:
  - name: sub
    call: child
    params: "X=21"
    output: SUB
  - name: show
    command: printf '%s' "$SUB"
    output: SHOWN
    depends: sub
  - name: pick
    command: echo "${SUB.outputs.TWICE}"
    output: PICKED
    depends: sub
"""
    )
    async with start(app) as rt:
        run = (await rt.ops.start("parent", {})).execution.id
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
        steps = await rt.ops.steps(run)
        children = await rt.ops.list_runs(workflow="child")
    assert row.status == "completed", row.error
    (child,) = children.items
    # Dagu's sub-DAG step prints the child's result as JSON: `${SUB.outputs.KEY}` reads it.
    assert json.loads(row.output["outputs"]["SHOWN"]) == {
        "name": "child",
        "dagRunId": child.id,
        "params": "X=21",
        "outputs": {"TWICE": "42"},
        "status": "succeeded",
    }
    assert row.output["outputs"]["PICKED"] == "42"
    assert child.id != run and child.status == "completed"
    call = next(r for r in steps if r.name == "call:sub")
    assert call.result["value"] == {"child": child.id}


async def test_a_failing_sub_dag_fails_the_call_step(start: Start) -> None:
    """A child run that fails fails its call step (and so the parent run)."""
    app = App()
    app.dag("name: kid\nsteps:\n  - name: boom\n    command: exit 1\n")
    app.dag("name: mom\nsteps:\n  - name: sub\n    call: kid\n")
    async with start(app) as rt:
        run = (await rt.ops.start("mom", {})).execution.id
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
        steps = await rt.ops.steps(run)
    assert row.status == "failed"
    assert node_results(steps) == {}


VOTED = """
name: voted
steps:
  - name: build
    command: "echo build >> {log}"
  - name: publish
    command: "echo publish >> {log}"
    depends: build
    approval:
      input: [TICKET]
      approvers: [al, bo, cy]
      quorum: 2
  - name: after
    command: "echo after-${TICKET} >> {log}"
    depends: publish
"""


def voted_app(log: Path) -> App:
    app = App()
    app.dag(VOTED.replace("{log}", str(log)))
    return app


async def test_a_dag_gate_with_approvers_and_a_quorum_waits_for_enough_approvals(
    start: Start, tmp_path: Path
) -> None:
    """`approval: {approvers, quorum}`: the first approval keeps the gate open under its key
    (showing the vote); an outsider is refused; the second approval lets the run go on with
    the approvals' inputs."""
    log = tmp_path / "log"
    async with start(voted_app(log)) as rt:
        run = (await rt.ops.start("voted", {}, by="dee")).execution.id
        gate = await parked_on(rt, run, "approval", "publish")
        await rt.ops.answer(run, gate["key"], {"decision": "approve", "TICKET": "T-1"}, by="al")
        still = await parked_on(rt, run, "approval", "publish")
        with pytest.raises(errors.VoteRefused):
            await rt.ops.answer(run, gate["key"], {"decision": "approve"}, by="dee")
        await rt.ops.answer(run, gate["key"], {"decision": "approve", "TICKET": "T-2"}, by="cy")
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert still["key"] == gate["key"]
    assert [v["by"] for v in still["votes"]] == ["al"]
    assert row.status == "completed", row.error
    assert log.read_text().split() == ["build", "publish", "after-T-2"]


async def test_one_rejection_of_a_voted_dag_gate_ends_the_run_at_once(
    start: Start, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    async with start(voted_app(log)) as rt:
        run = (await rt.ops.start("voted", {}, by="dee")).execution.id
        gate = await parked_on(rt, run, "approval", "publish")
        await rt.ops.answer(run, gate["key"], {"decision": "approve", "TICKET": "T"}, by="al")
        await rt.ops.answer(run, gate["key"], {"decision": "reject", "reason": "no"}, by="bo")
        row = (await rt.ops.get(run)).current
    assert (row.status, row.error["reason"], row.error["by"]) == ("failed", "no", "bo")
    assert "after" not in log.read_text()
