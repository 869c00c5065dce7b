"""dag_status: Dagu's run and step numbers derived from the row and its recorded steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.runtime.dag.status import dag_status
from tether.runtime.registry import App

from .conftest import Start
from .test_gates import gated_app, parked_on
from .test_run import run_to_end

pytestmark = pytest.mark.postgres


def labels(detail: object) -> dict[str, tuple[int, str]]:
    return {s.name: (s.status, s.status_label) for s in detail.steps}  # type: ignore[attr-defined]


async def test_statuses_through_an_approval(start: Start, tmp_path: Path) -> None:
    """Waiting at a gate: run 7, gate step 7, done 4, not started 0; each resume after a
    decision is a new attemptId; approved: run 4 and every step 4."""
    async with start(gated_app(tmp_path / "log")) as rt:
        run = (await rt.ops.start("gated", {})).execution.id
        gate = await parked_on(rt, run, "approval", "publish")
        row = (await rt.ops.get(run)).current
        waiting = dag_status(row, await rt.ops.steps(run))
        await rt.ops.answer(run, gate["key"], {"decision": "approve", "TICKET": "T"}, by="ann")
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
        done = dag_status(row, await rt.ops.steps(run))
    assert (waiting.status, waiting.status_label) == (7, "waiting")
    assert labels(waiting) == {
        "build": (4, "succeeded"),
        "publish": (7, "waiting"),
        "after": (0, "not_started"),
    }
    assert [w["name"] for w in waiting.waiting] == ["publish"]
    assert (done.status, done.status_label, done.finished_at) == (4, "succeeded", row.ended_at)
    assert set(labels(done).values()) == {(4, "succeeded")}
    publish = next(s for s in done.steps if s.name == "publish")
    assert publish.decision == {"decision": "approve", "by": "ann", "inputs": {"TICKET": "T"}}
    assert waiting.attempt_id is not None and done.attempt_id is not None
    assert waiting.attempt_id != done.attempt_id and len(done.attempt_id) == 6
    assert done.dag_run_id == row.business_id and done.name == "gated"


async def test_rejected_run_and_step_are_8(start: Start, tmp_path: Path) -> None:
    """Reject: the run and the gate step are `rejected` (8); the reason is kept; the step
    behind the gate is `aborted` (Dagu's scheduler: a rejected dependency aborts)."""
    async with start(gated_app(tmp_path / "log")) as rt:
        run = (await rt.ops.start("gated", {})).execution.id
        gate = await parked_on(rt, run, "approval", "publish")
        await rt.ops.answer(run, gate["key"], {"decision": "reject", "reason": "no"})
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
        detail = dag_status(row, await rt.ops.steps(run))
    assert (detail.status, detail.status_label) == (8, "rejected")
    assert labels(detail)["publish"] == (8, "rejected")
    assert labels(detail)["after"] == (3, "aborted")  # Dagu: "upstream rejected"


async def test_failed_skipped_and_partial_statuses(start: Start) -> None:
    """A failure is 2 (its error kept), a skipped step 5, a continueOn run 6; a step behind
    a failure is aborted, 3 ("upstream failed", as Dagu's scheduler marks it)."""
    app = App()
    app.dag(
        """
name: mixed
steps:
  - name: skip
    command: echo no
    preconditions: "false"
  - name: soft
    command: exit 4
    continueOn: failed
  - name: after
    command: echo yes
    depends: soft
"""
    )
    app.dag(
        "name: hard\nsteps:\n  - name: x\n    command: exit 1\n"
        "  - name: y\n    command: 'true'\n    depends: x\n"
    )
    async with start(app) as rt:
        mixed = await run_to_end(rt, "mixed")
        mixed_detail = dag_status(mixed, await rt.ops.steps(mixed.id))
        hard = await run_to_end(rt, "hard")
        hard_detail = dag_status(hard, await rt.ops.steps(hard.id))
    assert (mixed_detail.status, mixed_detail.status_label) == (6, "partially_succeeded")
    assert labels(mixed_detail) == {
        "skip": (5, "skipped"),
        "soft": (2, "failed"),
        "after": (4, "succeeded"),
    }
    assert (hard_detail.status, hard_detail.status_label) == (2, "failed")
    x = hard_detail.steps[0]
    assert (x.status, x.exit_code, x.error) == (2, 1, "exit status 1")
    y = hard_detail.steps[1]
    assert (y.status, y.status_label, y.error) == (3, "aborted", "upstream failed")  # Dagu
