"""A DAG retry (`again` with a `DagSteps` plan): the whole run, or from a step with or
without its downstream."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.runtime import errors
from tether.runtime.dag.retrying import DagSteps
from tether.runtime.dag.status import dag_status
from tether.runtime.operations import Operations
from tether.runtime.registry import App
from tether.runtime.rows import ExecutionRow

from .conftest import Start
from .test_gates import gated_app, parked_on

pytestmark = pytest.mark.postgres


async def retried(
    ops: Operations, run: str, step: str | None = None, *, downstream: bool = True
) -> ExecutionRow:
    """Dagu's retry of `run`: the one `again` operation with a DAG plan, same dagRunId."""
    plan = DagSteps(step, include_downstream=downstream)
    return await ops.again(run, plan=plan, business_id="same")


def flaky_app(log: Path, gate: Path) -> App:
    app = App()
    app.dag(
        f"""
name: flaky
steps:
  - name: a
    command: echo a | tee -a {log}
    output: A
  - name: b
    command: "echo b >> {log}; test -e {gate}"
    depends: a
  - name: c
    command: "echo c-${{A}} >> {log}"
    depends: b
  - name: d
    command: echo d >> {log}
"""
    )
    return app


async def test_whole_run_retry_reruns_failed_steps_and_downstream(
    start: Start, tmp_path: Path
) -> None:
    """No step named: failed and blocked steps run again; succeeded ones keep their results
    (their outputs still reach the rerun steps); same dagRunId, a new attemptId."""
    log, gate = tmp_path / "log", tmp_path / "gate"
    async with start(flaky_app(log, gate)) as rt:
        first = (await rt.ops.start("flaky", {})).execution.id
        old = (await rt.ops.wait_for_end(first, timeout=20)).current
        assert old.status == "failed"
        gate.touch()
        new = await retried(rt.ops, first)
        row = (await rt.ops.wait_for_end(new.id, timeout=20)).current
        detail = dag_status(row, await rt.ops.steps(new.id))
        old_detail = dag_status(
            (await rt.ops.get(first, follow_chain=False)).current, await rt.ops.steps(first)
        )
        with pytest.raises(errors.Conflict):
            await retried(rt.ops, first)
    assert row.status == "completed", row.error
    assert sorted(log.read_text().split()) == sorted(["a", "b", "d", "b", "c-a"])
    assert {s.name: s.status_label for s in detail.steps} == dict.fromkeys("abcd", "succeeded")
    assert detail.dag_run_id == old.business_id
    assert old_detail.status_label == "failed" and old_detail.attempt_id != detail.attempt_id


async def test_step_retry_with_and_without_downstream(start: Start, tmp_path: Path) -> None:
    """From step `a` alone: only `a` runs again; with its downstream: a, b and c do; the
    unrelated branch `d` keeps its status either way."""
    log, gate = tmp_path / "log", tmp_path / "gate"
    gate.touch()
    async with start(flaky_app(log, gate)) as rt:
        first = (await rt.ops.start("flaky", {})).execution.id
        await rt.ops.wait_for_end(first, timeout=20)
        log.write_text("")
        alone = await retried(rt.ops, first, "a", downstream=False)
        assert (await rt.ops.wait_for_end(alone.id, timeout=20)).current.status == "completed"
        assert log.read_text().split() == ["a"]
        log.write_text("")
        down = await retried(rt.ops, alone.id, "a", downstream=True)
        assert (await rt.ops.wait_for_end(down.id, timeout=20)).current.status == "completed"
        assert log.read_text().split() == ["a", "b", "c-a"]
        with pytest.raises(errors.InvalidInput):
            await retried(rt.ops, down.id, "nope")


async def test_retry_of_an_active_run_is_a_conflict(start: Start, tmp_path: Path) -> None:
    """A run that is waiting (active) cannot be retried (Dagu: 409)."""
    async with start(gated_app(tmp_path / "log")) as rt:
        run = (await rt.ops.start("gated", {})).execution.id
        await parked_on(rt, run, "approval", "publish")
        with pytest.raises(errors.Conflict):
            await retried(rt.ops, run)


async def test_a_step_retry_without_downstream_leaves_its_aborted_dependents_aborted(
    start: Start, tmp_path: Path
) -> None:
    """`b` failed and aborted `c`; retrying `b` alone runs only `b` (Dagu schedules only the
    steps not started; `c` kept `aborted`); with its downstream, `c` runs too."""
    log, gate = tmp_path / "log", tmp_path / "gate"
    async with start(flaky_app(log, gate)) as rt:
        first = (await rt.ops.start("flaky", {})).execution.id
        assert (await rt.ops.wait_for_end(first, timeout=20)).current.status == "failed"
        gate.touch()
        log.write_text("")
        alone = await retried(rt.ops, first, "b", downstream=False)
        row = (await rt.ops.wait_for_end(alone.id, timeout=20)).current
        detail = dag_status(row, await rt.ops.steps(alone.id))
        assert log.read_text().split() == ["b"]
        labels = {s.name: s.status_label for s in detail.steps}
        assert labels == {"a": "succeeded", "b": "succeeded", "c": "aborted", "d": "succeeded"}
        log.write_text("")
        down = await retried(rt.ops, alone.id, "b", downstream=True)
        assert (await rt.ops.wait_for_end(down.id, timeout=20)).current.status == "completed"
        assert log.read_text().split() == ["b", "c-a"]


STOPPED = """
name: stopped
steps:
  - name: one
    command: "echo one >> {log}"
  - name: nap
    command: "echo nap >> {log}; sleep 30"
    depends: one
  - name: after
    command: "echo after >> {log}"
    depends: nap
"""


async def test_a_step_stopped_mid_run_reads_aborted_and_a_retry_of_another_keeps_it(
    start: Start, tmp_path: Path
) -> None:
    """Stopped while `nap` runs: `nap` reads aborted (Dagu's cancel), `after` not started;
    retrying `one` alone runs `one` only, and `after` is aborted behind `nap`."""
    log = tmp_path / "log"
    log.write_text("")  # read while the run starts, before its first step writes to it
    app = App()
    app.dag(STOPPED.replace("{log}", str(log)))
    async with start(app) as rt:
        run = (await rt.ops.start("stopped", {})).execution.id
        await rt.ops.wait_until(run, lambda _: "nap" in log.read_text().split(), timeout=20)
        await rt.ops.terminate(run)
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
        detail = dag_status(row, await rt.ops.steps(run))
        assert {s.name: s.status_label for s in detail.steps} == {
            "one": "succeeded",
            "nap": "aborted",
            "after": "not_started",
        }
        log.write_text("")
        again = await retried(rt.ops, run, "one", downstream=False)
        end = (await rt.ops.wait_for_end(again.id, timeout=20)).current
        labels = {
            s.name: s.status_label for s in dag_status(end, await rt.ops.steps(again.id)).steps
        }
    assert log.read_text().split() == ["one"]
    assert labels == {"one": "succeeded", "nap": "aborted", "after": "aborted"}
