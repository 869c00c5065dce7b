"""DAG runs end to end on a real PostgreSQL with real subprocesses: shell steps, Python
actions, outputs, preconditions, continueOn, retries, timeouts and handlers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tether.runtime.context import Context
from tether.runtime.registry import App
from tether.runtime.service import Runtime
from tether.storage import checkpoints
from tether.storage.rows import ExecutionRow

from .conftest import Start

pytestmark = pytest.mark.postgres


async def run_to_end(rt: Runtime, dag: str, params: Any = None) -> ExecutionRow:
    started = await rt.ops.start(dag, {"params": params})
    view = await rt.ops.wait_for_end(started.execution.id, timeout=20)
    return view.current


def node_results(steps: list[Any]) -> dict[str, dict[str, Any]]:
    """The last recorded result of each DAG step, by step name."""
    out: dict[str, dict[str, Any]] = {}
    for rec in steps:
        if rec.kind == "step" and rec.name.startswith("node:"):
            out[rec.name[5:]] = rec.result["value"]
    return out


async def test_shell_steps_pass_outputs_and_params_downstream(start: Start) -> None:
    """`output: VAR` publishes trimmed stdout; `${VAR}` and params reach later steps (Dagu)."""
    app = App()
    app.dag(
        """
name: greet
params: "WHO=world"
steps:
  - name: first
    command: echo hello
    output: GREETING
  - name: second
    command: echo "${GREETING}, ${WHO}"
    output: LINE
    depends: first
"""
    )
    async with start(app) as rt:
        row = await run_to_end(rt, "greet", "WHO=tether")
        steps = await rt.ops.steps(row.id)
    assert row.status == "completed", row.error
    assert row.output == {
        "status": "succeeded",
        "outputs": {"GREETING": "hello", "LINE": "hello, tether"},
    }
    assert node_results(steps)["second"]["stdout"] == "hello, tether\n"


async def test_python_actions_get_their_with_arguments(start: Start) -> None:
    """A `run: name` step calls the function registered under that name (here with its
    `action` spelling) with `with:` as keyword args."""
    app = App()
    calls: list[dict[str, Any]] = []

    @app.action("add")
    def add(a: int, b: int, label: str) -> int:
        calls.append({"a": a, "b": b, "label": label})
        return a + b

    app.dag(
        """
name: sums
params: "LABEL=x"
steps:
  - name: s1
    run: add
    with: {a: 1, b: 2, label: "${LABEL}"}
    output: SUM
  - name: s2
    command: echo "sum=${SUM}"
    output: TEXT
    depends: s1
"""
    )
    async with start(app) as rt:
        row = await run_to_end(rt, "sums")
    assert row.status == "completed", row.error
    assert calls == [{"a": 1, "b": 2, "label": "x"}]
    assert row.output["outputs"] == {"SUM": "3", "TEXT": "sum=3"}


async def test_precondition_skips_a_step_and_its_dependents(start: Start) -> None:
    """A precondition that does not hold skips the step; its dependents are skipped too."""
    app = App()
    app.dag(
        """
name: pre
steps:
  - name: gated
    command: echo ran
    preconditions:
      - condition: "${MODE}"
        expected: "go"
  - name: after
    command: echo after
    depends: gated
  - name: other
    command: echo other
env:
  - MODE: stop
"""
    )
    async with start(app) as rt:
        row = await run_to_end(rt, "pre")
        steps = await rt.ops.steps(row.id)
    assert row.status == "completed", row.error
    results = node_results(steps)
    assert results["gated"]["status"] == "skipped"
    assert "after" not in results  # skipped without running
    assert results["other"]["status"] == "succeeded"


async def test_continue_on_failure_lets_dependents_run(start: Start) -> None:
    """continueOn.failure: the run goes on and ends partially_succeeded (Dagu status 6)."""
    app = App()
    app.dag(
        """
name: cont
steps:
  - name: bad
    command: "sh -c 'exit 3'"
    continueOn: {failure: true}
  - name: next
    command: echo next
    depends: bad
"""
    )
    async with start(app) as rt:
        row = await run_to_end(rt, "cont")
        steps = await rt.ops.steps(row.id)
    assert row.status == "completed", row.error
    assert row.output["status"] == "partially_succeeded"
    results = node_results(steps)
    assert results["bad"]["exit_code"] == 3
    assert results["next"]["status"] == "succeeded"


async def test_a_failed_step_fails_the_run_and_blocks_its_dependents(start: Start) -> None:
    """Without continueOn a failed step fails the run; its dependents never start."""
    app = App()
    app.dag(
        """
name: fails
steps:
  - name: bad
    command: "echo oops >&2; exit 2"
  - name: never
    command: echo never
    depends: bad
"""
    )
    async with start(app) as rt:
        row = await run_to_end(rt, "fails")
        steps = await rt.ops.steps(row.id)
    assert row.status == "failed"
    assert row.error["type"] == "DagFailed"
    results = node_results(steps)
    assert results["bad"]["stderr"] == "oops\n"
    assert "never" not in results


async def test_retry_policy_retries_until_success(start: Start, tmp_path: Path) -> None:
    """retryPolicy.limit: a failing step runs again (durable backoff) until it succeeds."""
    counter = tmp_path / "n"
    app = App()
    app.dag(
        f"""
name: flaky
steps:
  - name: flaky
    command: "echo x >> {counter}; test $(wc -l < {counter}) -ge 3"
    retryPolicy: {{limit: 3, intervalSec: 0}}
"""
    )
    async with start(app) as rt:
        row = await run_to_end(rt, "flaky")
        steps = await rt.ops.steps(row.id)
    assert row.status == "completed", row.error
    assert counter.read_text().count("x") == 3
    attempts = [r.result["value"]["status"] for r in steps if r.name == "node:flaky"]
    assert attempts == ["failed", "failed", "succeeded"]


async def test_timeout_kills_the_process_group(start: Start, tmp_path: Path) -> None:
    """timeoutSec: the command's whole process group is killed; the step fails."""
    marker = tmp_path / "late"
    app = App()
    app.dag(
        f"""
name: slow
steps:
  - name: slow
    command: "sleep 30 & wait; touch {marker}"
    timeoutSec: 1
"""
    )
    async with start(app) as rt:
        row = await run_to_end(rt, "slow")
        steps = await rt.ops.steps(row.id)
    assert row.status == "failed"
    result = node_results(steps)["slow"]
    assert result["exit_code"] is None
    assert "timed out" in result["error"]
    assert not marker.exists()


async def test_handlers_run_on_success_then_exit(start: Start, tmp_path: Path) -> None:
    """handlerOn.success runs after a successful run, then handlerOn.exit."""
    log = tmp_path / "log"
    app = App()
    app.dag(
        f"""
name: handled
steps:
  - name: only
    command: echo only >> {log}
handlerOn:
  success:
    command: echo success >> {log}
  failure:
    command: echo failure >> {log}
  exit:
    command: echo exit >> {log}
"""
    )
    async with start(app) as rt:
        row = await run_to_end(rt, "handled")
    assert row.status == "completed", row.error
    assert log.read_text().split() == ["only", "success", "exit"]


async def test_the_spec_is_written_with_the_first_steps_result(start: Start) -> None:
    """One commit per step: the recorded spec (`dag:spec`) rides on the first step's write,
    not on a commit of its own (what the shell-step benchmark measures); each later step commits."""
    app = App()
    app.dag(
        "name: two\ntype: chain\nsteps: [{name: a, command: echo a}, {name: b, command: echo b}]"
    )
    async with start(app) as rt:
        row = await run_to_end(rt, "two")
        async with rt.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT name, xmin::text AS tx FROM steps WHERE execution_id = $1", row.id
            )
    assert row.status == "completed", row.error
    tx = {r["name"]: r["tx"] for r in rows}
    assert tx["dag:spec"] == tx["node:a"] != tx["node:b"], tx


async def test_dag_steps_commit_without_waiting_for_the_flush_unless_told(
    start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DAG step's result commits without waiting for the disk flush (a worker's crash keeps
    it: tests/e2e/test_kill_dag.py); `TETHER_DAG_STEP_FLUSH=1` makes every one wait, and a
    Python workflow's steps always wait."""
    seen: list[tuple[str, bool]] = []
    real = checkpoints._checkpoint_step

    async def spy(conn: Any, w: Any) -> Any:
        seen.append((w.cp.records[-1]["name"], w.cp.flush))
        return await real(conn, w)

    monkeypatch.setattr(checkpoints, "_checkpoint_step", spy)
    app = App()
    steps = ", ".join(f"{{name: {n}, command: 'true'}}" for n in "abc")
    app.dag(f"name: three\ntype: chain\nsteps: [{steps}]")

    @app.workflow(name="plain")
    async def plain(ctx: Context) -> None:
        await ctx.step(lambda: 1, name="one")
        await ctx.step(lambda: 2, name="two")

    async with start(app) as rt:
        assert (await run_to_end(rt, "three")).status == "completed"
        monkeypatch.setenv("TETHER_DAG_STEP_FLUSH", "1")
        assert (await run_to_end(rt, "three")).status == "completed"
        started = await rt.ops.start("plain", None)
        assert (await rt.ops.wait_for_end(started.execution.id, timeout=20)).current.status == (
            "completed"
        )
    assert seen == [
        ("node:a", False), ("node:b", False),  # node:c rides on the settle, which waits
        ("node:a", True), ("node:b", True),
        ("one", True), ("two", True),
    ], seen  # fmt: skip


async def test_the_last_steps_result_rides_on_the_runs_settle(start: Start) -> None:
    """When nothing can run after a step (every other step has ended; no retry, gate or
    handler can follow it), its result commits with the run's end: one commit fewer. With a
    handler after it, or in a wave of two, each step's result keeps its own commit."""
    app = App()
    steps = "steps: [{name: a, command: 'true'}, {name: b, command: 'true'}]"
    app.dag(f"name: two\ntype: chain\n{steps}")
    app.dag(f"name: handled\ntype: chain\n{steps}\nhandlerOn: {{exit: {{command: 'true'}}}}")
    app.dag(f"name: pair\ntype: graph\n{steps}")
    ends: dict[str, tuple[str, dict[str, str]]] = {}
    async with start(app) as rt:
        for dag in ("two", "handled", "pair"):
            row = await run_to_end(rt, dag)
            assert row.status == "completed", row.error
            async with rt.pool.acquire() as conn:
                settle = await conn.fetchval(
                    "SELECT xmin::text FROM executions WHERE id = $1", row.id
                )
                rows = await conn.fetch(
                    "SELECT name, xmin::text AS tx FROM steps WHERE execution_id = $1", row.id
                )
            ends[dag] = (settle, {r["name"]: r["tx"] for r in rows})
    settle, tx = ends["two"]
    assert tx["node:b"] == settle != tx["node:a"], ends
    settle, tx = ends["handled"]
    assert settle not in (tx["node:b"], tx["handler:exit"]), ends
    settle, tx = ends["pair"]
    assert settle not in (tx["node:a"], tx["node:b"]), ends
