"""Each gate or human task waits on its own (Dagu holds up only a waiting step's dependents):
the steps that do not depend on it run meanwhile, and the run parks on its open asks once
nothing else can run; a decision on one of them takes effect as Dagu's does, whichever wave
asked it; a reader of the records sees what the run decided, where it decided it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tether.runtime.dag.status import dag_status
from tether.runtime.registry import App
from tether.runtime.service import Runtime
from tether.storage.rows import ExecutionRow

from .conftest import Start

pytestmark = pytest.mark.postgres


def keys(row: ExecutionRow) -> dict[str, str]:
    return {w["name"]: w["key"] for w in row.waits}


async def parked_on(rt: Runtime, run: str, names: set[str], check: Any = None) -> ExecutionRow:
    """The run once it parks on exactly the waits `names` (and `check(row)` holds)."""

    def ok(row: ExecutionRow) -> bool:
        on = row.status == "waiting" and set(keys(row)) == names
        return on and (check is None or check(row))

    view = await rt.ops.wait_until(run, ok, timeout=20)
    assert ok(view.current), view.current
    return view.current


async def labels(rt: Runtime, run: str) -> dict[str, str]:
    row = (await rt.ops.get(run)).current
    return {s.name: s.status_label for s in dag_status(row, await rt.ops.steps(run)).steps}


BRANCHES = """
name: branches
steps:
  - name: gate
    command: "true"
    approval: {prompt: "Go?"}
  - name: x
    command: "echo x >> {log}"
  - name: y
    command: "echo y >> {log}"
    depends: x
  - name: after
    command: "echo after >> {log}"
    depends: gate
"""


async def test_a_waiting_gate_holds_up_only_its_dependents(start: Start, tmp_path: Path) -> None:
    """While the gate waits, the branch beside it runs to its end; the run parks on the gate
    only then, and its dependent runs once it is approved."""
    log = tmp_path / "log"
    app = App()
    app.dag(BRANCHES.replace("{log}", str(log)))
    async with start(app) as rt:
        run = (await rt.ops.start("branches", {})).execution.id
        row = await parked_on(rt, run, {"gate"})
        assert log.read_text().split() == ["x", "y"]
        assert await labels(rt, run) == {
            "gate": "waiting",
            "x": "succeeded",
            "y": "succeeded",
            "after": "not_started",
        }
        await rt.ops.answer(run, keys(row)["gate"], {"decision": "approve"})
        end = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert end.status == "completed", end.error
    assert log.read_text().split() == ["x", "y", "after"]


LATER = """
name: later
steps:
  - id: review
    action: human.task
    with:
      prompt: Review
      form: {type: object, properties: {fine: {type: boolean}}}
  - name: build
    command: "echo build-$DAG_PUSHBACK_ITERATION >> {log}"
  - name: gate
    command: "true"
    depends: build
    approval: {rewind_to: build}
  - name: ship
    command: "echo ship >> {log}"
    depends: [review, gate]
"""


async def test_a_gate_asked_after_a_waiting_task_waits_beside_it_and_is_pushed_back_at_once(
    start: Start, tmp_path: Path
) -> None:
    """The task is asked with the first wave, the gate with the second: both wait together.
    A push-back of the gate runs its rewound part at once while the task keeps its key."""
    log = tmp_path / "log"
    app = App()
    app.dag(LATER.replace("{log}", str(log)))
    async with start(app) as rt:
        run = (await rt.ops.start("later", {})).execution.id
        first = await parked_on(rt, run, {"review", "gate"})
        await rt.ops.answer(run, keys(first)["gate"], {"decision": "push_back"}, by="ann")
        again = await parked_on(
            rt, run, {"review", "gate"}, lambda r: keys(r)["gate"] != keys(first)["gate"]
        )
        assert keys(again)["review"] == keys(first)["review"]
        assert log.read_text().split() == ["build-", "build-1"]
        assert await labels(rt, run) == {
            "review": "waiting",
            "build": "succeeded",
            "gate": "waiting",
            "ship": "not_started",
        }
        await rt.ops.answer(run, keys(again)["review"], {"fine": True})
    # a worker restarted while the gate still waits replays the run to the same state: the
    # task's answer, found at its first position, applies only with the gate's decision
    async with start(app) as rt:
        await rt.ops.signal(run, "nudge", None)  # a replay
        replayed = await parked_on(rt, run, {"gate"}, lambda r: r.version > again.version)
        assert keys(replayed)["gate"] == keys(again)["gate"]
        assert log.read_text().split() == ["build-", "build-1"]
        assert (await labels(rt, run))["review"] == "succeeded"
        await rt.ops.answer(run, keys(again)["gate"], {"decision": "approve"})
        end = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert end.status == "completed", end.error
    assert log.read_text().split() == ["build-", "build-1", "ship"]


REWOUND = """
name: rewound
steps:
  - name: prep
    command: '[ -z "$DAG_PUSHBACK_ITERATION" ] || until [ -f {go} ]; do sleep 0.05; done'
  - id: review
    action: human.task
    depends: prep
    with:
      prompt: Review
      push_back: {rewind_to: prep}
  - name: build
    command: "true"
    depends: prep
  - name: gate
    command: "true"
    depends: build
    approval: {}
"""


async def test_a_reader_applies_a_carried_push_back_where_the_run_did(
    start: Start, tmp_path: Path
) -> None:
    """The task is asked before the gate runs, and pushed back once both wait: its rewind
    resets the gate too, though the gate's records come after the task's ask. While `prep`
    runs again, every rewound step reads reset, not as it was before the push-back."""
    go = tmp_path / "go"
    app = App()
    app.dag(REWOUND.replace("{go}", str(go)))
    async with start(app) as rt:
        run = (await rt.ops.start("rewound", {})).execution.id
        first = await parked_on(rt, run, {"review", "gate"})
        await rt.ops.answer(run, keys(first)["review"], {"decision": "push_back"}, by="bo")
        rewinding = {
            "prep": "running",
            "review": "not_started",
            "build": "not_started",
            "gate": "not_started",
        }

        async def reads_rewinding(row: ExecutionRow) -> bool:
            return row.status == "running" and await labels(rt, run) == rewinding

        await rt.ops.wait_until(run, reads_rewinding, timeout=20)
        assert await labels(rt, run) == rewinding
        go.touch()
        again = await parked_on(
            rt, run, {"review", "gate"}, lambda r: keys(r)["gate"] != keys(first)["gate"]
        )
        for key in keys(again).values():
            await rt.ops.answer(run, key, {"decision": "approve"} if "gate" in key else {})
        end = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert end.status == "completed", end.error


FORK = """
name: fork
steps:
  - name: build
    command: "echo build-$DAG_PUSHBACK_ITERATION >> {log}"
  - name: gate_a
    command: "true"
    depends: build
    approval: {rewind_to: build}
  - name: gate_b
    command: "echo b >> {log}"
    depends: build
    approval: {}
"""


async def test_an_approval_a_later_push_back_resets_is_asked_again(
    start: Start, tmp_path: Path
) -> None:
    """`gate_b` is approved (the run waits on `gate_a`), then `gate_a` is pushed back to
    `build`, which `gate_b` depends on: as in Dagu, the rewind resets `gate_b` too, so it runs
    and is asked again rather than keeping its approval."""
    log = tmp_path / "log"
    app = App()
    app.dag(FORK.replace("{log}", str(log)))
    async with start(app) as rt:
        run = (await rt.ops.start("fork", {})).execution.id
        first = await parked_on(rt, run, {"gate_a", "gate_b"})
        await rt.ops.answer(run, keys(first)["gate_b"], {"decision": "approve"})
        await rt.ops.answer(run, keys(first)["gate_a"], {"decision": "push_back"})
        again = await parked_on(rt, run, {"gate_a", "gate_b"}, lambda r: r.version > first.version)
        assert keys(again)["gate_b"] != keys(first)["gate_b"]
        assert sorted(log.read_text().split()) == ["b", "b", "build-", "build-1"]
        assert (await labels(rt, run))["gate_b"] == "waiting"
