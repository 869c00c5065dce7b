"""`dagu_execute` waits and decisions across sub-DAG runs, over real HTTP: a parent
parked on a child that stops at a gate returns at that checkpoint, and the decision reaches the
child through `subDAGRunId`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_dagu_execute import execute, ok, read, refused
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


async def test_a_rejection_in_a_sub_dag_run_ends_it_and_fails_its_call_step(
    mcp_server: ServeFn, client: Client
) -> None:
    """The child ends rejected in the decision's own write; its end reaches the parent,
    whose call step fails and whose dependent never runs."""
    app = App()
    app.dag(KID)
    app.dag(MOM)
    async with mcp_server(app) as url:
        c = client(url)
        out = ok(await execute(c, action="start", name="mom", dagRunId="m-2", wait=True))
        (sub,) = [s for s in out["run"]["steps"] if s["name"] == "sub"]
        ((child_id, child_uri),) = [(r["dagRunId"], r["uri"]) for r in sub["subRuns"]]
        base = {"name": "mom", "dagRunId": "m-2", "stepName": "check", "subDAGRunId": child_id}
        ok(await execute(c, action="reject", **base, reason="no"))
        child = await read(c, child_uri)
        assert (child["statusLabel"], child["steps"][0]["statusLabel"]) == ("rejected", "rejected")
        async with asyncio.timeout(20):
            # the parent wakes (running) when the child ends, then ends itself
            live = ("waiting", "running", "queued")
            while (mom := await read(c, out["runUri"]))["statusLabel"] in live:  # noqa: ASYNC110 — a reader polls
                await asyncio.sleep(0.05)
        labels = {s["name"]: s["statusLabel"] for s in mom["steps"]}
        assert (mom["statusLabel"], labels) == ("failed", {"sub": "failed", "after": "aborted"})


INLINE = """
params: "WHO=nobody"
steps:
  - name: greet
    command: echo "hello ${WHO}"
    output: GREETING
  - name: shout
    command: echo "${GREETING}!"
    depends: greet
"""
INLINE_ACTIONS = """
steps:
  - name: twice
    run: twice
    with: {n: 21}
"""


async def test_an_inline_spec_runs_to_completion_and_its_output_reads_back(
    mcp_server: ServeFn, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`inline_spec` with shell steps (the operator allowed them) and with an app action
    (allowed by default): each runs to `succeeded`; the logs URI shows the steps' output, the
    run URI the run; `dagu_read` does not list the inline DAG (no DAG definition is made)."""
    monkeypatch.setenv("TETHER_INLINE_SHELL", "1")
    app = App()
    calls: list[int] = []

    @app.action("twice")
    async def twice(n: int) -> int:
        calls.append(n)
        return 2 * n

    app.dag(KID)  # the app serves dagu_execute once it has a DAG
    async with mcp_server(app) as url:
        c = client(url)
        out = ok(
            await execute(
                c,
                action="start",
                targetType="inline_spec",
                name="adhoc",
                spec=INLINE,
                params={"WHO": "tether"},
                dagRunId="i-1",
                wait=True,
            )
        )
        assert (out["completed"], out["statusLabel"]) == (True, "succeeded"), out
        assert (out["dagName"], out["runUri"]) == ("adhoc", "dagu://runs/adhoc/i-1")
        assert [s["statusLabel"] for s in out["run"]["steps"]] == ["succeeded"] * 2
        logs = await c.result("resources/read", {"uri": out["logsUri"]}, capabilities={})
        text = logs["contents"][0]["text"]
        assert "hello tether" in text and "hello tether!" in text
        # dagu_execute creates no DAG definition: the inline DAG is not listed nor readable
        assert [d["name"] for d in (await read(c, "dagu://dags"))["dags"]] == ["kid"]
        missing = await c.result(
            "tools/call",
            {"name": "dagu_read", "arguments": {"uri": "dagu://dags/adhoc"}},
            capabilities={},
        )
        assert missing["structuredContent"]["code"] == "resource_not_found", missing
        done = ok(
            await execute(
                c,
                action="enqueue",
                targetType="inline_spec",
                name="doubler",
                spec=INLINE_ACTIONS,
                wait=True,
            )
        )
        assert (done["completed"], done["statusLabel"]) == (True, "succeeded"), done
        assert calls == [21]


HOLDER = """
name: holder
queue: q1
steps:
  - name: hold
    command: "true"
    approval: {prompt: "Let the queue go?"}
"""


async def test_an_inline_run_runs_the_spec_it_was_started_with(
    mcp_server: ServeFn, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queued inline run whose DAG name is given another spec before it is admitted still
    runs its own spec."""
    monkeypatch.setenv("TETHER_INLINE_SHELL", "1")
    app = App()
    app.dag(HOLDER)
    spec = "steps:\n  - name: say\n    command: echo said-{}\n"
    async with mcp_server(app, queues="q1=1") as url:
        c = client(url)
        ok(await execute(c, action="enqueue", name="holder", dagRunId="h-1", wait=True))
        inline = {"targetType": "inline_spec", "name": "adhoc"}
        ok(
            await execute(
                c, action="enqueue", **inline, spec=spec.format("A"), queue="q1", dagRunId="a-1"
            )
        )
        b = ok(await execute(c, action="start", **inline, spec=spec.format("B"), wait=True))
        assert b["statusLabel"] == "succeeded", b
        ok(await execute(c, action="approve", name="holder", dagRunId="h-1", stepName="hold"))
        uri = "dagu://runs/adhoc/a-1"
        async with asyncio.timeout(20):
            while (await read(c, uri))["statusLabel"] in ("queued", "running"):  # noqa: ASYNC110 — a reader polls
                await asyncio.sleep(0.1)
        logs = await read(c, uri + "/logs")
    assert logs["steps"][0]["stdout"].strip() == "said-A", logs
