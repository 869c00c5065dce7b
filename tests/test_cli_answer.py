"""`tether runs answer RUN WAIT RESPONSE` takes the wait's name as well as its key, refuses an
answer that does not fit (exit 1, naming the problem), and answers a stale key or an unknown
name with the waits open now, so the operator can retry."""

from __future__ import annotations

import asyncio
import subprocess

import orjson
import pytest

from tests.apps import answering
from tests.test_cli import as_json, tether
from tether.examples import app
from tether.runtime.service import running
from tether.runtime.worker import WorkerSettings

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

ANSWERING = "tests/apps/answering.py:app"
FAST = WorkerSettings(concurrency=2, lease_s=5.0, poll_s=0.05, shutdown_grace_s=1.0)


async def cli(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(tether, db_url, "runs", *args, check=False)


async def test_runs_answer_takes_a_name_and_names_the_open_wait_when_refusing(
    db_url: str,
) -> None:
    async with running(db_url, app, run_migrations=False, worker_settings=FAST) as rt:
        started = await rt.ops.start("document_review", {"title": "T", "body": "a b c"})
        run_id = started.execution.id
        parked = await rt.ops.wait_until(run_id, lambda r: bool(r.waits), timeout=10)
        key = parked.current.waits[0]["key"]

        missing = await cli(db_url, "answer", run_id, "publish", '{"decision": "approve"}')
        assert missing.returncode == 1 and "AnswerRejected" in missing.stderr
        assert "ticket" in missing.stderr
        unknown = await cli(db_url, "answer", run_id, "pubish", '{"decision": "approve"}')
        assert unknown.returncode == 1 and "WaitNotOpen" in unknown.stderr
        assert key in unknown.stderr and "approval 'publish'" in unknown.stderr
        stale = key.rsplit(":", 1)[0] + ":1"
        refused = await cli(db_url, "answer", run_id, stale, '{"decision": "approve"}')
        assert refused.returncode == 1 and key in refused.stderr

        response = orjson.dumps({"decision": "approve", "ticket": "CHG-1"}).decode()
        answered = await cli(db_url, "--json", "answer", run_id, "publish", response)
        assert answered.returncode == 0, answered.stderr
        assert as_json(answered) == {"status": "accepted", "execution_id": run_id, "key": key}
        again = await cli(db_url, "--json", "answer", run_id, key, response)
        assert as_json(again)["status"] == "duplicate"
        done = await rt.ops.wait_for_end(run_id, timeout=10)
        assert done.current.output["ticket"] == "CHG-1"


async def test_runs_answer_takes_text_that_is_not_json_only_where_a_string_fits(
    db_url: str,
) -> None:
    """Our rule for text on every surface: a signal of no schema takes `go ahead` as the
    string it is; an approval, which takes an object, refuses it naming the answer (exit 1,
    nothing answered). Before, the command refused any text that was not JSON (exit 2)."""
    async with running(db_url, answering.app, run_migrations=False, worker_settings=FAST) as rt:
        run_id = (await rt.ops.start("both", {})).execution.id
        parked = await rt.ops.wait_until(run_id, lambda r: len(r.waits) == 2, timeout=10)
        keys = {w["kind"]: w["key"] for w in parked.current.waits}

        refused = await cli(db_url, "--app", ANSWERING, "answer", run_id, keys["approval"], "ok")
        assert refused.returncode == 1 and "AnswerRejected" in refused.stderr
        assert "(root):" in refused.stderr
        taken = await cli(db_url, "--app", ANSWERING, "answer", run_id, keys["signal"], "go ahead")
        assert taken.returncode == 0, taken.stderr
        approve = orjson.dumps({"decision": "approve"}).decode()
        await cli(db_url, "--app", ANSWERING, "answer", run_id, keys["approval"], approve)
        done = await rt.ops.wait_for_end(run_id, timeout=10)
    assert done.current.output == ["go ahead", "Approved"]
