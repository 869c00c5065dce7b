"""Two worker processes share 300 runs: every plain step runs exactly once across both."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.apps.killable import app
from tether.runtime.operations import Operations, RunView

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
APP_SPEC = "tests/apps/killable.py:app"
RUNS = 300
STEPS = ("a", "b", "c")
READY = re.compile(r"worker \S+ running")


class Workers:
    """Worker subprocesses of this test; whatever is still alive is killed on exit."""

    def __init__(self, db_url: str, logs: Path) -> None:
        self.db_url = db_url
        self.logs = logs
        self.procs: list[subprocess.Popen[bytes]] = []

    def spawn(self, label: str, **env: str) -> subprocess.Popen[bytes]:
        base = {k: v for k, v in os.environ.items() if k != "KILL_AT"}
        with (self.logs / f"{label}.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tether", "worker", APP_SPEC],
                cwd=REPO,
                env={**base, "TETHER_DATABASE_URL": self.db_url, "TETHER_POLL_S": "0.1", **env},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs.append(proc)
        return proc

    def log(self, label: str) -> str:
        return (self.logs / f"{label}.log").read_text("utf-8", errors="replace")

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture
def workers(db_url: str, tmp_path: Path) -> Iterator[Workers]:
    ws = Workers(db_url, tmp_path)
    try:
        yield ws
    finally:
        ws.kill_all()


async def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """The exit code, or None if the process is still running after `timeout` seconds."""
    try:
        return await asyncio.to_thread(proc.wait, timeout)
    except subprocess.TimeoutExpired:
        return None


async def test_two_worker_processes_share_runs_and_run_each_plain_step_once(
    db: asyncpg.Pool, workers: Workers, tmp_path: Path
) -> None:
    """300 runs over two processes: all complete, each step's effect appears exactly once."""
    effects = tmp_path / "effects"
    effects.mkdir()
    env = {"TETHER_WORKERS": "8", "TETHER_LEASE_S": "10", "SIDE_EFFECT_DIR": str(effects)}
    procs = {label: workers.spawn(label, **env) for label in ("worker1", "worker2")}

    # Both must be claiming before the runs arrive, or the first one up could take them all.
    try:
        async with asyncio.timeout(30):
            while not all(READY.search(workers.log(label)) for label in procs):
                for label, proc in procs.items():
                    assert proc.poll() is None, f"{label} exited early:\n{workers.log(label)}"
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail("workers not ready in 30s:\n" + "\n".join(map(workers.log, procs)))

    ops = Operations(db, app)
    ids = [(await ops.start("three_appends", {"n": n})).execution.id for n in range(RUNS)]
    views: dict[str, RunView] = {}
    async with asyncio.timeout(60):
        for rid in ids:
            views[rid] = await ops.wait_for_end(rid, timeout=60)

    for proc in procs.values():
        proc.send_signal(signal.SIGTERM)
    for label, proc in procs.items():
        code = await _wait_exit(proc, 20)
        assert code == 0, f"{label} exited {code}:\n{workers.log(label)}"

    for n, rid in enumerate(ids):
        run = views[rid].current
        assert (run.id, run.status, run.output) == (rid, "completed", n + 3), run.error
        ended = [ev for ev in await ops.history(rid) if ev.type == "ended"]
        assert [ev.data["status"] for ev in ended] == ["completed"], f"run {n}: {ended}"

    files = {path.name: path.read_text("utf-8").splitlines() for path in effects.iterdir()}
    assert set(files) == {f"{proc.pid}.log" for proc in procs.values()}, "both did some work"
    assert all(files.values())
    lines = Counter(line for found in files.values() for line in found)
    expected = {f"{rid} {step}" for rid in ids for step in STEPS}
    assert set(lines) == expected
    assert [line for line, count in lines.items() if count != 1] == []
