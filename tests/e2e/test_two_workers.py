"""Two worker processes share 300 runs: every plain step runs exactly once across both."""

from __future__ import annotations

import asyncio
import re
import signal
from collections import Counter
from pathlib import Path

import asyncpg
import pytest

from tests.apps.killable import app
from tests.e2e.conftest import Workers, wait_exit
from tether.runtime.operations import Operations, RunView

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.slow]

RUNS = 300
STEPS = ("a", "b", "c")
READY = re.compile(r"worker \S+ running")


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
        code = await wait_exit(proc, 20)
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
