"""A push-back while another ask of the wave still waits (Dagu resumes at once): the pushed-back
steps run again and ask again under a new attempt, while the other ask keeps waiting under the
key it had, answerable as before; a restarted worker replays to the same state."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tether.runtime import errors
from tether.runtime.dag.status import dag_status
from tether.runtime.registry import App
from tether.runtime.service import Runtime
from tether.storage.rows import ExecutionRow

from .conftest import Start

pytestmark = pytest.mark.postgres

TWO_GATES = """
name: two_gates
steps:
  - name: build_a
    command: "echo a-$DAG_PUSHBACK_ITERATION-${NOTE} >> {log}"
  - name: gate_a
    command: "true"
    depends: build_a
    approval:
      input: [NOTE]
      rewind_to: build_a
  - name: build_b
    command: "echo b-$DAG_PUSHBACK_ITERATION >> {log}"
  - name: gate_b
    command: "true"
    depends: build_b
    approval:
      rewind_to: build_b
  - name: finish
    depends: [gate_a, gate_b]
    command: "echo finish >> {log}"
"""


def app(log: Path) -> App:
    a = App()
    a.dag(TWO_GATES.replace("{log}", str(log)))
    return a


def lines(log: Path) -> list[str]:
    """The log's lines, the first wave's two (concurrent) builds in a fixed order."""
    got = log.read_text().split()
    return sorted(got[:2]) + got[2:]


def keys(row: ExecutionRow) -> dict[str, str]:
    return {w["name"]: w["key"] for w in row.waits}


async def parked(rt: Runtime, run: str, check: Any = None) -> ExecutionRow:
    """The run once it parks on both gates (and `check(row)` holds)."""

    def ok(row: ExecutionRow) -> bool:
        both = row.status == "waiting" and set(keys(row)) == {"gate_a", "gate_b"}
        return both and (check is None or check(row))

    view = await rt.ops.wait_until(run, ok, timeout=20)
    assert ok(view.current), view.current
    return view.current


async def snapshot(rt: Runtime, row: ExecutionRow) -> Mapping[str, Any]:
    detail = dag_status(row, await rt.ops.steps(row.id))
    steps = {s.name: (s.status_label, s.push_back_iteration) for s in detail.steps}
    return {"attempt": detail.attempt_id, "steps": steps, "waits": row.waits}


async def push_back(rt: Runtime, run: str, key: str, response: dict[str, Any]) -> None:
    """Push back through the one answer path, which resumes the run at once."""
    await rt.ops.answer(run, key, {"decision": "push_back", **response}, by="ann")


NUDGE = "nudge"  # any signal wakes a parked run, which replays and parks again


async def test_a_push_back_reruns_at_once_while_the_other_gate_keeps_its_key(
    start: Start, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    async with start(app(log)) as rt:
        run = (await rt.ops.start("two_gates", {})).execution.id
        first = await parked(rt, run)
        before = await snapshot(rt, first)
        await push_back(rt, run, keys(first)["gate_a"], {"NOTE": "fix"})
        again = await parked(rt, run, lambda r: keys(r)["gate_a"] != keys(first)["gate_a"])
        assert keys(again)["gate_b"] == keys(first)["gate_b"]
        assert lines(log) == ["a--", "b-", "a-1-fix"]
        now = await snapshot(rt, again)
        assert now["steps"]["gate_a"] == ("waiting", 1)
        assert now["steps"]["gate_b"] == ("waiting", 0)
        assert now["attempt"] != before["attempt"]
        # both gates wait under the run's current attempt
        assert {w["attempt"] for w in again.waits} == {now["attempt"]}
        # the pushed-back wait is decided: a repeat is a no-op, another answer a conflict
        old_a = keys(first)["gate_a"]
        repeat = await rt.ops.answer(run, old_a, {"decision": "push_back", "NOTE": "fix"})
        assert repeat.status == "duplicate"
        with pytest.raises(errors.AnswerConflict):
            await rt.ops.answer(run, old_a, {"decision": "approve"})
    # a worker restarted while the run waits replays it to the same state, the same keys
    async with start(app(log)) as rt:
        await rt.ops.signal(run, NUDGE, None)
        replayed = await parked(rt, run, lambda r: r.version > again.version)
        assert await snapshot(rt, replayed) == now
        old_b = keys(first)["gate_b"]
        assert (await rt.ops.answer(run, old_b, {"decision": "approve"})).status == "accepted"
        assert (await rt.ops.answer(run, old_b, {"decision": "approve"})).status == "duplicate"
        await rt.ops.answer(run, keys(again)["gate_a"], {"decision": "approve"})
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert row.status == "completed", row.error
    assert lines(log) == ["a--", "b-", "a-1-fix", "finish"]


async def test_both_gates_pushed_back_in_turn_each_rerun_then_the_run_completes(
    start: Start, tmp_path: Path
) -> None:
    """The second push-back reaches a gate carried past the first one: its answer, found on
    every later replay at the gate's first position, is applied where the run applied it."""
    log = tmp_path / "log"
    async with start(app(log)) as rt:
        run = (await rt.ops.start("two_gates", {})).execution.id
        first = await parked(rt, run)
        await push_back(rt, run, keys(first)["gate_a"], {"NOTE": "x"})
        second = await parked(rt, run, lambda r: keys(r)["gate_a"] != keys(first)["gate_a"])
        await push_back(rt, run, keys(second)["gate_b"], {})
        third = await parked(rt, run, lambda r: keys(r)["gate_b"] != keys(first)["gate_b"])
        assert keys(third)["gate_a"] == keys(second)["gate_a"]
        assert lines(log) == ["a--", "b-", "a-1-x", "b-1"]
        detail = dag_status(third, await rt.ops.steps(run))
        labels = {s.name: (s.status_label, s.push_back_iteration) for s in detail.steps}
        assert labels["gate_a"] == ("waiting", 1) and labels["gate_b"] == ("waiting", 1)
        for key in keys(third).values():
            await rt.ops.answer(run, key, {"decision": "approve"})
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert row.status == "completed", row.error
    assert log.read_text().split()[-1] == "finish"


async def labels_once_reset(rt: Runtime, run: str) -> dict[str, str]:
    """The step labels once the gate reads reset by its push-back (the run goes on)."""
    for _ in range(200):
        row = (await rt.ops.get(run)).current
        labels = {s.name: s.status_label for s in dag_status(row, await rt.ops.steps(run)).steps}
        if labels["gate"] == "not_started":
            return labels
        await asyncio.sleep(0.05)
    raise AssertionError(f"the gate never read reset: {labels}")


SHARED = """
name: shared
steps:
  - name: build
    command: '[ -z "$DAG_PUSHBACK_ITERATION" ] || until [ -f {go} ]; do sleep 0.05; done;
      echo build-$DAG_PUSHBACK_ITERATION >> {log}'
  - name: gate
    command: "true"
    depends: build
    approval: {rewind_to: build}
  - id: review
    action: human.task
    depends: build
    with:
      prompt: Review
      form: {type: object, properties: {fine: {type: boolean}}}
"""


async def test_a_push_back_that_resets_the_other_waiting_step_asks_it_anew(
    start: Start, tmp_path: Path
) -> None:
    """The task is downstream of the gate's rewind target: it is reset too (not waiting while
    the target runs again) and asked again under a new key; its old key is not open, and its
    old wait takes no answer to the new one."""
    log, go = tmp_path / "log", tmp_path / "go"
    shared = App()
    shared.dag(SHARED.replace("{log}", str(log)).replace("{go}", str(go)))
    async with start(shared) as rt:
        run = (await rt.ops.start("shared", {})).execution.id

        def on_both(check: Any = None) -> Any:
            def ok(row: ExecutionRow) -> bool:
                both = row.status == "waiting" and set(keys(row)) == {"gate", "review"}
                return both and (check is None or check(row))

            return ok

        first = (await rt.ops.wait_until(run, on_both(), timeout=20)).current
        await push_back(rt, run, keys(first)["gate"], {})
        assert await labels_once_reset(rt, run) == {
            "build": "running",
            "gate": "not_started",
            "review": "not_started",
        }
        go.touch()
        moved = on_both(lambda r: keys(r)["review"] != keys(first)["review"])
        again = (await rt.ops.wait_until(run, moved, timeout=20)).current
        assert moved(again), again
        assert keys(again)["gate"] != keys(first)["gate"]
        with pytest.raises(errors.WaitNotOpen):
            await rt.ops.answer(run, keys(first)["review"], {"fine": False})
        await rt.ops.answer(run, keys(again)["review"], {"fine": True})
        await rt.ops.answer(run, keys(again)["gate"], {"decision": "approve"})
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert row.status == "completed", row.error
    assert log.read_text().split() == ["build-", "build-1"]


async def test_a_reject_of_the_gate_carried_past_a_push_back_ends_the_run_at_once(
    start: Start, tmp_path: Path
) -> None:
    """The carried gate's rejection ends the run in the answer's own write: rejected."""
    log = tmp_path / "log"
    async with start(app(log)) as rt:
        run = (await rt.ops.start("two_gates", {})).execution.id
        first = await parked(rt, run)
        await push_back(rt, run, keys(first)["gate_a"], {})
        again = await parked(rt, run, lambda r: keys(r)["gate_a"] != keys(first)["gate_a"])
        reject = {"decision": "reject", "reason": "no"}
        await rt.ops.answer(run, keys(again)["gate_b"], reject, by="bo")
        row = (await rt.ops.get(run)).current  # ended by the answer's own write
        detail = dag_status(row, await rt.ops.steps(run))
    assert (row.status, row.error["kind"], row.error["gate"]) == ("failed", "rejected", "gate_b")
    labels = {s.name: s.status_label for s in detail.steps}
    assert (labels["gate_b"], labels["gate_a"], labels["finish"]) == (
        "rejected",
        "aborted",  # it still waited: waiting -> aborted when the run ends
        "aborted",  # upstream rejected
    ), labels
