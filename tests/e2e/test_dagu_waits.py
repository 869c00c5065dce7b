"""`dagu_execute` waits and decisions across sub-DAG runs, over real HTTP (issue 13): a parent
parked on a child that stops at a gate returns at that checkpoint, and the decision reaches the
child through `subDAGRunId`."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_dagu_execute import execute, ok, refused
from tests.mcp_client import McpClient
from tether.runtime.registry import App

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]
Client = Callable[[str], McpClient]

KID = """
name: kid
steps:
  - name: check
    command: "echo check"
    approval: {prompt: "Kid ok?"}
"""
MOM = """
name: mom
steps:
  - name: sub
    call: kid
  - name: after
    command: "echo after"
    depends: sub
"""


async def test_a_wait_on_a_parent_returns_when_its_sub_dag_run_waits_at_a_gate(
    mcp_server: ServeFn, client: Client
) -> None:
    app = App()
    app.dag(KID)
    app.dag(MOM)
    async with mcp_server(app) as url:
        c = client(url)
        began = time.monotonic()
        out = ok(
            await execute(
                c, action="start", name="mom", dagRunId="m-1", wait=True, waitTimeoutSeconds=5
            )
        )
        assert time.monotonic() - began < 4, "the wait ran to its timeout"
        assert "waitTimedOut" not in out, out
        assert (out["completed"], out["status"], out["statusLabel"]) == (False, 7, "waiting")
        assert (out["run"]["status"], out["run"]["statusLabel"]) == (7, "waiting")
        (sub,) = [s for s in out["run"]["steps"] if s["name"] == "sub"]
        assert sub["statusLabel"] == "waiting"
        ((child_id, child_uri),) = [(r["dagRunId"], r["uri"]) for r in sub["subRuns"]]
        child = ok(
            await c.result(
                "tools/call",
                {"name": "dagu_read", "arguments": {"uri": child_uri}},
                capabilities={},
            )
        )
        assert [s["approval"] for s in child["steps"]] == [{"prompt": "Kid ok?"}]
        base = {"name": "mom", "dagRunId": "m-1", "stepName": "check"}
        # the step is the child's: without subDAGRunId the parent has no such step
        refused(await execute(c, action="approve", **base), "resource_not_found", "stepName")
        done = ok(await execute(c, action="approve", subDAGRunId=child_id, **base, wait=True))
        assert done["subDAGRunId"] == child_id
        assert (done["completed"], done["statusLabel"]) == (True, "succeeded")
