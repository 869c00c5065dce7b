"""SIGKILL a worker in the middle of a DAG run: the next worker resumes it; finished steps do
not run again; the step that was cut off mid-command runs again (at-least-once)."""

from __future__ import annotations

import signal
from pathlib import Path

import asyncpg
import pytest

from tests.apps.killable_dag import app
from tests.e2e.conftest import Workers, wait_exit
from tether.runtime.dag.status import dag_status
from tether.runtime.operations import Operations

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.slow]


async def test_a_killed_worker_resumes_the_dag_without_rerunning_finished_steps(
    db: asyncpg.Pool, db_url: str, tmp_path: Path
) -> None:
    evidence_dir = tmp_path / "evidence"
    evidence_dir.mkdir()
    workers = Workers(db_url, tmp_path, "tests/apps/killable_dag.py:app")
    try:
        ops = Operations(db, app)
        run = (await ops.start("killme", {})).execution.id
        env = {"SIDE_EFFECT_DIR": str(evidence_dir)}
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
    finally:
        workers.kill_all()
    assert row.status == "completed", row.error
    lines = [ln.split() for ln in (evidence_dir / "evidence").read_text().splitlines()]
    assert [step for step, _ in lines] == ["a", "b", "c", "c", "d"]
    pids = [int(pid) for _, pid in lines]
    assert pids[:3] == [first.pid] * 3 and pids[3:] == [second.pid] * 2
    assert [s.status_label for s in detail.steps] == ["succeeded"] * 4
