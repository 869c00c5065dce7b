"""`dagu_execute` on a run that waits on two steps at once (Dagu's conformance fixture: a human
task and an approval gate, independent), over real HTTP: a rejection ends the run at once
while the task still waits; a decided step reads as decided while the other still waits; a
step waits on its own, beside the steps that do not depend on it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_dagu_execute import execute, ok, read, refused
from tests.mcp_client import McpClient
from tests.waiting import until
from tether.runtime.registry import App
from tether.storage.rows import ExecutionRow
from tether.tools.dagu import decide
from tether.tools.dagu.uris import run_uri

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]
Client = Callable[[str], McpClient]

TWO = """
name: two_waits
steps:
  - name: pick_shelf
    id: pick_shelf
    action: human.task
    with:
      prompt: Which shelf does the new stock go on?
      form:
        type: object
        properties:
          shelf: {type: string, enum: [lower, upper]}
        required: [shelf]
  - name: restock_gate
    id: restock_gate
    command: "true"
    approval:
      prompt: Order the restock?
      input: [ticket]
      required: [ticket]
  - name: label_shelf
    depends: [pick_shelf, restock_gate]
    command: "echo ${steps.pick_shelf.outputs.shelf}"
"""


NAP = """
name: nap
steps:
  - name: sleep
    command: "sleep 30"
"""


def app() -> App:
    a = App()
    a.dag(TWO)
    a.dag(NAP)
    return a


async def test_a_rejection_ends_the_run_while_another_step_still_waits(
    mcp_server: ServeFn, client: Client
) -> None:
    async with mcp_server(app()) as url:
        c = client(url)
        base = {"name": "two_waits", "dagRunId": "r-1"}
        out = ok(await execute(c, action="start", **base, wait=True, waitTimeoutSeconds=10))
        waiting = [s["name"] for s in out["run"]["steps"] if s["statusLabel"] == "waiting"]
        assert waiting == ["pick_shelf", "restock_gate"], out
        began = time.monotonic()
        rejected = ok(
            await execute(
                c,
                action="reject",
                **base,
                stepName="restock_gate",
                reason="not today",
                wait=True,
                waitTimeoutSeconds=10,
            )
        )
        assert time.monotonic() - began < 5, "the rejected run kept waiting"
        assert (rejected["completed"], rejected["status"], rejected["statusLabel"]) == (
            True,
            8,
            "rejected",
        ), rejected
        (gate,) = [s for s in rejected["run"]["steps"] if s["name"] == "restock_gate"]
        assert gate["statusLabel"] == "rejected"
        assert "finishedAt" in rejected["run"]
        refused(
            await execute(
                c, action="approve", **base, stepName="pick_shelf", inputs={"shelf": "x"}
            ),
            "conflict",
        )


async def test_a_reject_replies_with_the_run_rejected_and_a_read_agrees(
    mcp_server: ServeFn, client: Client
) -> None:
    """Without `wait`, the reply reads the run after the decision: the step and the run were
    rejected in the same write, so it is 8 `rejected`, as is every read after it."""
    async with mcp_server(app()) as url:
        c = client(url)
        base = {"name": "two_waits", "dagRunId": "x-1"}
        ok(await execute(c, action="start", **base, wait=True, waitTimeoutSeconds=10))
        out = ok(
            await execute(c, action="reject", **base, stepName="restock_gate", reason="not today")
        )
        assert (out["status"], out["statusLabel"]) == (8, "rejected"), out
        run = await read(c, out["runUri"])
        assert (run["status"], run["statusLabel"]) == (8, "rejected"), run
        assert "finishedAt" in run
        steps = {s["name"]: s for s in run["steps"]}
        assert steps["restock_gate"]["statusLabel"] == "rejected", steps
        assert steps["restock_gate"]["decision"]["reason"] == "not today", steps
        assert steps["pick_shelf"]["statusLabel"] == "aborted", steps


async def test_a_decided_step_reads_decided_while_the_other_still_waits(
    mcp_server: ServeFn, client: Client
) -> None:
    async with mcp_server(app()) as url:
        c = client(url)
        base = {"name": "two_waits", "dagRunId": "d-1"}
        out = ok(await execute(c, action="start", **base, wait=True, waitTimeoutSeconds=10))
        attempt = out["run"]["attemptId"]
        busy = refused(await execute(c, action="retry", **base), "conflict")
        assert busy["details"]["statusLabel"] == "waiting" and "d-1" in busy["message"], busy
        bad = {"stepName": "pick_shelf", "inputs": {"shelf": "roof"}}
        err = refused(await execute(c, action="approve", **base, **bad), "invalid_tool_input")
        assert err["field"] == "inputs" and err["message"].startswith("shelf:"), err
        task = {"stepName": "pick_shelf", "inputs": {"shelf": "upper"}}
        done = ok(await execute(c, action="approve", **base, **task, attemptId=attempt))
        assert (done["status"], done["statusLabel"]) == (7, "waiting"), done
        run = await read(c, done["runUri"])
        labels = {s["name"]: s["statusLabel"] for s in run["steps"]}
        assert labels == {
            "pick_shelf": "succeeded",
            "restock_gate": "waiting",
            "label_shelf": "not_started",
        }, run
        again = refused(await execute(c, action="approve", **base, **task), "conflict")
        assert "succeeded" in again["message"], again
        gate = {"stepName": "restock_gate", "inputs": {"ticket": "T-1"}, "attemptId": attempt}
        end = ok(await execute(c, action="approve", **base, **gate, wait=True))
        assert (end["completed"], end["statusLabel"]) == (True, "succeeded"), end
        logs = await read(c, end["logsUri"])
        assert logs["steps"][-1]["stdout"].strip() == "upper"


async def test_a_stopped_run_shows_its_waiting_steps_aborted(
    mcp_server: ServeFn, client: Client
) -> None:
    """Dagu's node cancel: a waiting step ends aborted."""
    async with mcp_server(app()) as url:
        c = client(url)
        base = {"name": "two_waits", "dagRunId": "s-1"}
        ok(await execute(c, action="start", **base, wait=True, waitTimeoutSeconds=10))
        out = ok(await execute(c, action="stop", **base, wait=True, waitTimeoutSeconds=10))
        assert (out["completed"], out["statusLabel"]) == (True, "aborted"), out
        steps = {s["name"]: s for s in out["run"]["steps"]}
        assert steps["pick_shelf"]["statusLabel"] == "aborted", steps
        assert "humanTask" not in steps["pick_shelf"]
        assert steps["restock_gate"]["statusLabel"] == "aborted"
        # a run stopped before it recorded anything still has its DAG's steps
        nap = {"name": "nap", "dagRunId": "n-1"}
        ok(await execute(c, action="start", **nap))
        ok(await execute(c, action="stop", **nap, wait=True, waitTimeoutSeconds=10))
        err = refused(await execute(c, action="approve", **nap, stepName="sleep"), "conflict")
        assert err["field"] == "stepName", err


async def test_a_push_back_resumes_at_once_while_the_other_step_still_waits(
    mcp_server: ServeFn, client: Client
) -> None:
    """Dagu resumes the run on a push-back: the gate runs again and waits under a new attempt,
    while the task keeps waiting, decided as before against the run's current attempt."""
    async with mcp_server(app()) as url:
        c = client(url)
        base = {"name": "two_waits", "dagRunId": "p-1"}
        out = ok(await execute(c, action="start", **base, wait=True, waitTimeoutSeconds=10))
        first = out["run"]["attemptId"]
        began = time.monotonic()
        gate = {"stepName": "restock_gate", "attemptId": first}
        back = ok(await execute(c, action="push_back", **base, **gate, wait=True))
        assert time.monotonic() - began < 5, "the push-back waited for the other step"
        assert (back["completed"], back["statusLabel"]) == (False, "waiting"), back
        run = back["run"]
        steps = {s["name"]: s for s in run["steps"]}
        assert steps["restock_gate"]["statusLabel"] == "waiting", steps
        assert steps["restock_gate"]["pushBackIteration"] == 1, steps
        assert steps["pick_shelf"]["statusLabel"] == "waiting", steps
        now = run["attemptId"]
        assert now != first
        task = {"stepName": "pick_shelf", "inputs": {"shelf": "lower"}}
        stale = await execute(c, action="approve", **base, **task, attemptId=first)
        assert refused(stale, "conflict", "attemptId")["details"]["attemptId"] == now, stale
        done = ok(await execute(c, action="approve", **base, **task, attemptId=now))
        assert done["statusLabel"] == "waiting", done
        gate = {"stepName": "restock_gate", "inputs": {"ticket": "T-2"}, "attemptId": now}
        end = ok(await execute(c, action="approve", **base, **gate, wait=True))
        assert (end["completed"], end["statusLabel"]) == (True, "succeeded"), end
        logs = await read(c, end["logsUri"])
        assert logs["steps"][-1]["stdout"].strip() == "lower"


BUSY = """
name: busy
steps:
  - name: build
    command: '[ -z "$DAG_PUSHBACK_ITERATION" ] || until [ -f {go} ]; do sleep 0.05; done'
  - name: gate_a
    command: "true"
    depends: build
    approval: {rewind_to: build}
  - name: prep
    command: "true"
  - name: gate_b
    command: "true"
    depends: prep
    approval: {}
"""


async def test_a_decision_while_the_run_reruns_pushed_back_steps_lands_once_it_parks(
    mcp_server: ServeFn, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the run runs again the steps a push-back reset, the other gate still reads
    waiting; a decision on it waits for the run to park again, then lands (Dagu refuses a
    decision while its run runs)."""
    parked_or_ended = decide._parked_or_ended
    seen: list[bool] = []  # what the decision found each time it looked at the run

    def looked(row: ExecutionRow) -> bool:
        seen.append(parked_or_ended(row))
        return seen[-1]

    monkeypatch.setattr(decide, "_parked_or_ended", looked)
    go = tmp_path / "go"
    busy = App()
    busy.dag(BUSY.replace("{go}", str(go)))
    async with mcp_server(busy) as url:
        c = client(url)
        base = {"name": "busy", "dagRunId": "b-1"}
        ok(await execute(c, action="start", **base, wait=True, waitTimeoutSeconds=10))
        back = ok(await execute(c, action="push_back", **base, stepName="gate_a"))
        assert back["statusLabel"] == "running", back
        run = await read(c, run_uri("busy", "b-1"))
        labels = {s["name"]: s["statusLabel"] for s in run["steps"]}
        assert (labels["build"], labels["gate_a"], labels["gate_b"]) == (
            "running",
            "not_started",
            "waiting",
        ), labels
        decision = asyncio.create_task(execute(c, action="approve", **base, stepName="gate_b"))
        await until(lambda: False in seen, what="the decision finding the run running")
        assert not decision.done(), decision
        go.touch()
        assert ok(await decision)["statusLabel"] == "waiting"
        end = ok(await execute(c, action="approve", **base, stepName="gate_a", wait=True))
        assert (end["completed"], end["statusLabel"]) == (True, "succeeded"), end


STAGGERED = """
name: staggered
steps:
  - name: review
    id: review
    action: human.task
    with:
      prompt: Review the plan
      form: {type: object, properties: {fine: {type: boolean}}}
  - name: build
    command: "echo build-$DAG_PUSHBACK_ITERATION >> {log}"
  - name: gate
    command: "true"
    depends: build
    approval: {prompt: "Ship it?", rewind_to: build}
  - name: ship
    command: "echo ship >> {log}"
    depends: [review, gate]
"""


async def test_a_push_back_resumes_at_once_while_a_step_asked_earlier_still_waits(
    mcp_server: ServeFn, client: Client, tmp_path: Path
) -> None:
    """The task waits from the first wave, the gate from the second (Dagu: both wait, each
    holding up only its dependents); pushing the gate back runs `build` again at once."""
    log = tmp_path / "log"
    staggered = App()
    staggered.dag(STAGGERED.replace("{log}", str(log)))
    async with mcp_server(staggered) as url:
        c = client(url)
        base = {"name": "staggered", "dagRunId": "g-1"}
        out = ok(await execute(c, action="start", **base, wait=True, waitTimeoutSeconds=10))
        labels = {s["name"]: s["statusLabel"] for s in out["run"]["steps"]}
        assert (labels["review"], labels["gate"]) == ("waiting", "waiting"), labels
        back = ok(
            await execute(
                c, action="push_back", **base, stepName="gate", wait=True, waitTimeoutSeconds=10
            )
        )
        assert (back["completed"], back["statusLabel"]) == (False, "waiting"), back
        steps = {s["name"]: s for s in back["run"]["steps"]}
        assert steps["gate"]["pushBackIteration"] == 1, steps
        assert steps["review"]["statusLabel"] == "waiting", steps
        assert log.read_text().split() == ["build-", "build-1"]
        task = {"stepName": "review", "inputs": {"fine": True}}
        assert ok(await execute(c, action="approve", **base, **task))["statusLabel"] == "waiting"
        end = ok(await execute(c, action="approve", **base, stepName="gate", wait=True))
        assert (end["completed"], end["statusLabel"]) == (True, "succeeded"), end
    assert log.read_text().split() == ["build-", "build-1", "ship"]


BESIDE = """
name: beside
steps:
  - name: gate
    command: "true"
    approval: {prompt: "Go?"}
  - name: slow
    command: 'until [ -f {go} ]; do sleep 0.05; done'
  - name: after
    command: "true"
    depends: gate
"""


async def test_a_gate_waiting_beside_a_running_step_is_decided_once_the_run_waits(
    mcp_server: ServeFn, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate reads waiting while the step beside it still runs (the run is `running`, as
    Dagu's); a decision then is a `conflict` naming the run's status, and lands once the run
    waits."""
    monkeypatch.setattr(decide, "_BUSY_S", 0.2)
    go = tmp_path / "go"
    beside = App()
    beside.dag(BESIDE.replace("{go}", str(go)))
    async with mcp_server(beside) as url:
        c = client(url)
        base = {"name": "beside", "dagRunId": "b-1"}
        ok(await execute(c, action="start", **base))

        uri = run_uri("beside", "b-1")
        run = await read_until(c, uri, lambda r: _label(r, "gate") == "waiting")
        assert run["statusLabel"] == "running", run
        busy = refused(await execute(c, action="approve", **base, stepName="gate"), "conflict")
        assert (busy["field"], busy["details"]["statusLabel"]) == ("stepName", "running"), busy
        go.touch()
        await read_until(c, uri, lambda r: r["statusLabel"] == "waiting")
        end = ok(await execute(c, action="approve", **base, stepName="gate", wait=True))
        assert (end["completed"], end["statusLabel"]) == (True, "succeeded"), end


def _label(run: dict[str, Any], step: str) -> str:
    return str(next(s["statusLabel"] for s in run["steps"] if s["name"] == step))


async def read_until(
    c: McpClient, uri: str, check: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The run detail once `check` holds (a reader polls, as a Dagu client does)."""

    async def read_if() -> dict[str, Any] | None:
        run = await read(c, uri)
        return run if check(run) else None

    return await until(read_if, what=f"{uri} to read as expected")
