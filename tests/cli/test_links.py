"""`tether links RUN WAIT --approver NAME`: an operator mints approval links from the command
line; each verifies under the servers' TETHER_STATE_KEY and names its wait, decision and
person; a person outside the approval's approvers, or a wait that is not open, gets none (exit
1); minting is audited (our choice: docs/answering-waits.md)."""

from __future__ import annotations

import asyncio
import subprocess

import asyncpg
import pytest

from tests.conftest import direct_url
from tests.test_cli import as_json, tether
from tether.runtime import links
from tether.runtime.context import Context
from tether.runtime.registry import App
from tether.runtime.service import running
from tether.runtime.worker import WorkerSettings

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

FAST = WorkerSettings(concurrency=2, lease_s=5.0, poll_s=0.05, shutdown_grace_s=1.0)
ENV = {"TETHER_STATE_KEY": "cli-secret", "TETHER_PUBLIC_URL": "https://tether.example.com"}


def voting() -> App:
    app = App()

    @app.workflow
    async def deploy(ctx: Context) -> None:
        await ctx.approval("ship", approvers=["alice", "bob"], quorum=2)

    return app


async def cli(
    db_url: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        tether, db_url, *args, check=False, env=ENV if env is None else env
    )


async def test_links_prints_a_verified_link_per_person_and_decision(db_url: str) -> None:
    async with running(db_url, voting(), run_migrations=False, worker_settings=FAST) as rt:
        run_id = (await rt.ops.start("deploy")).execution.id
        parked = await rt.ops.wait_until(run_id, lambda r: bool(r.waits), timeout=10)
        key = parked.current.waits[0]["key"]
        made = await cli(
            db_url,
            "--json",
            "links",
            run_id,
            "ship",
            "--approver",
            "alice",
            "--approver",
            "bob",
            "--ttl",
            "2h",
        )
        only = await cli(db_url, "links", run_id, key, "--approver", "bob", "--decision", "reject")
        outsider = await cli(db_url, "links", run_id, "ship", "--approver", "mallory")
        closed = await cli(db_url, "links", run_id, "nope", "--approver", "alice")
        unset = await cli(db_url, "links", run_id, "ship", "--approver", "alice", env={})
    assert made.returncode == 0, made.stderr
    items = as_json(made)
    assert [(i["approver"], i["decision"]) for i in items] == [
        (who, d) for who in ("alice", "bob") for d in ("approve", "reject", "push_back")
    ]
    key_ = links.link_key(b"cli-secret")
    prefix = "https://tether.example.com/console/links/"
    for item in items:
        link = links.read(key_, item["url"].removeprefix(prefix))
        assert link is not None and link.key == key == item["key"]
        assert (link.approver, link.decision) == (item["approver"], item["decision"])
    assert only.returncode == 0 and only.stdout.startswith(f"bob reject: {prefix}")
    assert len(only.stdout.splitlines()) == 1
    assert outsider.returncode == 1 and "not among the approvers" in outsider.stderr
    assert closed.returncode == 1 and "no open wait" in closed.stderr
    assert unset.returncode == 2 and "TETHER_STATE_KEY" in unset.stderr
    conn = await asyncpg.connect(direct_url(db_url))
    try:
        rows = await conn.fetch(
            "SELECT outcome FROM audit WHERE method = 'links/mint' AND execution_id = $1"
            " ORDER BY id",
            run_id,
        )
    finally:
        await conn.close()
    assert [r["outcome"] for r in rows] == ["ok", "ok", "refused", "refused"]
