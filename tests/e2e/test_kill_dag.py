"""SIGKILL a worker in the middle of a DAG run: the next worker resumes it; finished steps do
not run again; the step that was cut off mid-command runs again (at-least-once). Killed while
a step's result is still committing and the next step's shell waits at its gate, the next
step's command never ran, and the finished step is not run again."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import asyncpg
import pytest

from tests.apps.killable_dag import app
from tests.e2e.conftest import Workers, wait_exit
from tests.waiting import at_gate, ended, until, waiting_on_a_lock
from tether.runtime.dag.status import dag_status
from tether.runtime.operations import Operations

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.slow]
# The steps read these from the worker's environment, so the worker passes them through.
PASSED = {"TETHER_DAG_ENV_PASSTHROUGH": "PATH,SIDE_EFFECT_DIR,KILL_DAG"}


async def test_a_killed_worker_resumes_the_dag_without_rerunning_finished_steps(
    db: asyncpg.Pool, db_url: str, tmp_path: Path
) -> None:
    evidence_dir = tmp_path / "evidence"
    evidence_dir.mkdir()
    workers = Workers(db_url, tmp_path, "tests/apps/killable_dag.py:app")
    try:
        ops = Operations(db, app)
        run = (await ops.start("killme", {})).execution.id
        env = {"SIDE_EFFECT_DIR": str(evidence_dir), **PASSED}
        first = workers.spawn(
            "worker1", KILL_DAG="1", TETHER_WORKERS="1", TETHER_LEASE_S="1", **env
        )
        code = await wait_exit(first, 60)
        assert code == -signal.SIGKILL, f"worker 1 exited {code}:\n{workers.log('worker1')}"
        second = workers.spawn("worker2", TETHER_WORKERS="2", TETHER_LEASE_S="5", **env)
        row = (await ops.wait_for_end(run, timeout=60)).current
        second.send_signal(signal.SIGTERM)
        assert await wait_exit(second, 20) == 0, workers.log("worker2")
        detail = dag_status(row, await ops.steps(run))
        # `tether worker` runs on the loop `tether serve` runs on (uvloop where installed).
        assert "(event loop: uvloop)" in workers.log("worker2")
    finally:
        workers.kill_all()
    assert row.status == "completed", row.error
    lines = [ln.split() for ln in (evidence_dir / "evidence").read_text().splitlines()]
    assert [step for step, _ in lines] == ["a", "b", "c", "c", "d"]
    pids = [int(pid) for _, pid in lines]
    assert pids[:3] == [first.pid] * 3 and pids[3:] == [second.pid] * 2
    assert [s.status_label for s in detail.steps] == ["succeeded"] * 4


def _read(path: Path) -> list[list[str]]:
    return [ln.split() for ln in path.read_text().splitlines()] if path.exists() else []


async def _lines(path: Path, want: str, timeout: float = 30.0) -> list[list[str]]:
    """The evidence lines once one starts with `want`."""
    async with asyncio.timeout(timeout):
        while True:
            lines = _read(path)
            if any(line[0] == want for line in lines):
                return lines
            await asyncio.sleep(0.05)


async def test_killed_at_a_gate_the_next_command_never_ran(
    db: asyncpg.Pool, db_url: str, tmp_path: Path
) -> None:
    """`b`'s result cannot commit (the test holds the run's row), so `c`'s shell, started
    while `b` ran (`dag/ahead.py`), waits at its gate; the worker is killed there. `c` never
    ran in it; `b`'s statement, already with PostgreSQL, commits once the row is let go, so
    the next worker runs `c` and `d` once each and `b` not again."""
    evidence_dir = tmp_path / "evidence"
    evidence_dir.mkdir()
    evidence = evidence_dir / "evidence"
    workers = Workers(db_url, tmp_path, "tests/apps/killable_dag.py:app")
    env = {"SIDE_EFFECT_DIR": str(evidence_dir), **PASSED}
    try:
        ops = Operations(db, app)
        run = (await ops.start("gated", {})).execution.id
        first = workers.spawn("worker1", TETHER_WORKERS="1", TETHER_LEASE_S="2", **env)
        await _lines(evidence, "b-start")
        async with db.acquire() as conn:
            hold = conn.transaction()
            await hold.start()
            await conn.execute("SELECT 1 FROM executions WHERE id = $1 FOR UPDATE", run)
            await _lines(evidence, "b-end")
            # c's shell waits at its gate, and b's write for the row
            c_shell = await until(lambda: at_gate('echo "c $PPID"', of=first.pid), timeout=20)
            await until(lambda: waiting_on_a_lock(db), timeout=20, what="b's write")
            first.send_signal(signal.SIGKILL)
            assert await wait_exit(first, 20) == -signal.SIGKILL
            # its gate closed with the worker: the shell ends (had it run `c`, after writing)
            await until(lambda: ended(c_shell), what="c's shell ending")
            at_kill = [line[0] for line in _read(evidence)]
            await hold.rollback()
        second = workers.spawn("worker2", TETHER_WORKERS="2", TETHER_LEASE_S="5", **env)
        row = (await ops.wait_for_end(run, timeout=60)).current
        second.send_signal(signal.SIGTERM)
        assert await wait_exit(second, 20) == 0, workers.log("worker2")
    finally:
        workers.kill_all()
    assert row.status == "completed", row.error
    assert at_kill == ["a", "b-start", "b-end"]
    lines = _read(evidence)
    assert [step for step, _ in lines] == ["a", "b-start", "b-end", "c", "d"]
    pids = [int(pid) for _, pid in lines]
    assert pids[:3] == [first.pid] * 3 and pids[3:] == [second.pid] * 2
