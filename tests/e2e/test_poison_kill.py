"""A poison run: its step ends the worker process (`os._exit(1)`) every time it runs. After
TETHER_MAX_RECOVERY_ATTEMPTS lost leases in a row it ends failed, with an error that says
so, in tasks/get, the status tool and `tether runs show` (DBOS has the same guard).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable

import asyncpg
import orjson
import pytest

from tests.apps.killable import app
from tests.conftest import database_env
from tests.e2e.conftest import REPO, Workers, on_loopback, server_settings, wait_exit
from tests.mcp_client import McpClient
from tether.app import create_app
from tether.runtime.operations import Operations

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.slow]

LIMIT = 2
MESSAGE = (
    f"run abandoned: its worker was lost {LIMIT} times in a row while running it "
    f"(TETHER_MAX_RECOVERY_ATTEMPTS={LIMIT})"
)
ERROR = {"kind": "abandoned", "type": "RunAbandoned", "message": MESSAGE, "lost_leases": LIMIT}
ENV = {"TETHER_MAX_RECOVERY_ATTEMPTS": str(LIMIT), "TETHER_LEASE_S": "0.5", "POISON_EXIT": "1"}


async def _runs_show(db_url: str, run_id: str) -> dict[str, object]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "tether", "--log-level", "ERROR", "runs", "--app", "tests/apps/killable.py:app"),
        *("--json", "show", run_id),
        cwd=REPO,
        env={**os.environ, **database_env(db_url)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    shown: dict[str, object] = orjson.loads(out)
    return shown


async def test_a_run_that_kills_its_worker_every_time_ends_failed_after_the_limit(
    db: asyncpg.Pool,
    db_url: str,
    workers: Workers,
    client: Callable[[str], McpClient],
) -> None:
    """Each worker that runs it dies in the step; the claim after the LIMIT-th lost lease
    ends the run failed instead of running it again, and every surface shows why."""
    ops = Operations(db, app)
    run_id = (await ops.start("poison")).execution.id

    for n in range(1, LIMIT + 1):  # each of these runs the poison step and dies in it
        worker = workers.spawn(f"worker{n}", **ENV)
        code = await wait_exit(worker, 60)
        assert code == 1, f"worker {n} exited {code}:\n{workers.log(f'worker{n}')}"
    last = workers.spawn("last", **ENV)  # this one claims it once more and gives up on it
    view = await ops.wait_for_end(run_id, timeout=60)
    last.send_signal(signal.SIGTERM)
    code = await wait_exit(last, 20)
    assert code == 0, f"the last worker exited {code}:\n{workers.log('last')}"

    run = view.current
    assert (run.id, run.status, run.error) == (run_id, "failed", ERROR)
    assert run.attempt == LIMIT + 1  # claimed LIMIT times to run, once to abandon
    steps = {s.name: s.done for s in await ops.steps(run_id)}
    assert steps == {"before": True}  # the progress it made is kept; the dying step never ran
    ended = [ev.data for ev in await ops.history(run_id) if ev.type == "ended"]
    assert ended == [{"status": "failed", "error": ERROR}]

    conf = server_settings(db_url)
    async with on_loopback(create_app(app, conf, db_url, run_workers=False)) as url:
        c = client(url)
        task = await c.result("tasks/get", {"taskId": run_id})
        status = await c.result(
            "tools/call", {"name": "poison_status", "arguments": {"handle": run_id}}
        )
    assert task["status"] == "completed"  # a workflow error is a tool error
    assert task["result"]["isError"] is True
    assert task["result"]["content"] == [{"type": "text", "text": f"RunAbandoned: {MESSAGE}"}]
    assert status["structuredContent"]["state"] == "failed"
    assert status["structuredContent"]["error"] == f"RunAbandoned: {MESSAGE}"
    assert status["structuredContent"]["error_details"] == ERROR

    shown = await _runs_show(db_url, run_id)
    assert (shown["status"], shown["error"]) == ("failed", ERROR)
