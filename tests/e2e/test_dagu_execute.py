"""`dagu_execute` over real HTTP: every action with and without `wait` (terminal, waiting
checkpoint, timeout), decisions on gates and human tasks (push-back with rewind_to, form
refusals, attemptId conflicts), retry from a step, enqueue under a queue limit, singleton,
inline specs, roles, resources and a DAG started as an MCP task."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.conftest import direct_url
from tests.e2e.conftest import ServeFn
from tests.e2e.test_fuzz_endpoint import snapshot
from tests.mcp_client import McpClient
from tether.runtime.registry import App
from tether.security import new_token

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]
Client = Callable[[str], McpClient]
PLAIN: dict[str, Any] = {}

GATED = """
name: gated
steps:
  - name: build
    command: "echo build-$DAG_PUSHBACK_ITERATION-${NOTE} >> {log}"
  - name: publish
    command: "echo publish >> {log}"
    depends: build
    approval:
      prompt: Publish?
      input: [TICKET, NOTE]
      required: [TICKET]
      rewind_to: build
  - name: after
    command: "echo after-${TICKET} >> {log}"
    depends: publish
"""
TASK = """
name: task
steps:
  - name: prep
    command: "echo prep >> {log}"
  - id: count
    action: human.task
    depends: prep
    with:
      prompt: How many?
      form:
        type: object
        properties:
          qty: {type: integer, minimum: 1}
        required: [qty]
      push_back:
        rewind_to: prep
        form:
          type: object
          properties:
            why: {type: string}
  - name: use
    command: "echo qty=${steps.count.outputs.qty} >> {log}"
    depends: count
"""
QUICK = """
name: quick
params: "WHO=world"
steps:
  - name: hello
    command: "echo hello-${WHO}"
"""
SLOW = """
name: slow
queue: q1
steps:
  - name: nap
    command: "sleep 30"
"""
FLAKY = """
name: flaky
steps:
  - name: one
    command: "echo one >> {log}"
  - name: two
    command: "test -f {marker} && echo two >> {log}"
    depends: one
  - name: three
    command: "echo three >> {log}"
    depends: two
"""
MCPDAG = """
name: served
mcp: true
steps:
  - name: work
    command: "echo work"
    approval: {prompt: "Go?"}
"""


def dag_app(tmp: Path) -> App:
    app = App()
    log, marker = tmp / "log", tmp / "marker"
    for text in (GATED, TASK, QUICK, SLOW, FLAKY, MCPDAG):
        app.dag(text.replace("{log}", str(log)).replace("{marker}", str(marker)))
    return app


async def execute(c: McpClient, **arguments: Any) -> dict[str, Any]:
    return await c.result(
        "tools/call", {"name": "dagu_execute", "arguments": arguments}, capabilities=PLAIN
    )


def ok(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is False, result
    out: dict[str, Any] = result["structuredContent"]
    return out


async def read(c: McpClient, uri: str) -> dict[str, Any]:
    params = {"name": "dagu_read", "arguments": {"uri": uri}}
    return ok(await c.result("tools/call", params, capabilities={}))


def refused(result: dict[str, Any], code: str, field: str | None = None) -> dict[str, Any]:
    assert result["isError"] is True, result
    err: dict[str, Any] = result["structuredContent"]
    assert err["code"] == code, err
    if field is not None:
        assert err.get("field") == field, err
    return err


async def test_start_with_wait_returns_the_finished_run(
    mcp_server: ServeFn, client: Client, tmp_path: Path
) -> None:
    async with mcp_server(dag_app(tmp_path)) as url:
        c = client(url)
        listed = await c.result("tools/list", capabilities=PLAIN)
        names = {t["name"] for t in listed["tools"]}
        assert {
            "dagu_execute",
            "dagu_read",
            "start_served",
            "served_status",
            "served_watch",
        } <= names
        assert not {"answer_served", "signal_served"} & names
        result = await execute(
            c, action="start", name="quick", params={"WHO": "you"}, wait=True, dagRunId="q-1"
        )
        out = ok(result)
        assert out["completed"] is True
        assert (out["status"], out["statusLabel"]) == (4, "succeeded")
        assert out["runUri"] == "dagu://runs/quick/q-1"
        assert out["logsUri"] == "dagu://runs/quick/q-1/logs"
        assert out["references"][0] == "dagu://reference/authoring"
        assert "subscribe" not in out
        run = out["run"]
        assert run["steps"][0]["statusLabel"] == "succeeded" and run["attemptId"]
        links = [i for i in result["content"] if i["type"] == "resource_link"]
        assert [(i["name"], i["uri"]) for i in links] == [
            ("dag_run", out["runUri"]),
            ("dag_run_logs", out["logsUri"]),
        ]
        logs = await c.result("resources/read", {"uri": out["logsUri"]}, capabilities=PLAIN)
        assert "hello-you" in logs["contents"][0]["text"]
        templates = await c.result("resources/templates/list", capabilities=PLAIN)
        assert any(
            t["uriTemplate"] == "dagu://runs/{name}/{dagRunId}"
            for t in templates["resourceTemplates"]
        )
        # the same dagRunId again is a conflict
        refused(await execute(c, action="start", name="quick", dagRunId="q-1"), "conflict")
        refused(await execute(c, action="start", name="nope"), "resource_not_found", "name")


async def test_gate_approve_reject_push_back_and_attempt_conflicts(
    mcp_server: ServeFn, client: Client, tmp_path: Path, db_url: str
) -> None:
    async with mcp_server(dag_app(tmp_path)) as url:
        c = client(url)
        started = ok(await execute(c, action="start", name="gated", wait=True, dagRunId="g-1"))
        assert started["completed"] is False and started["statusLabel"] == "waiting"
        (gate,) = [s for s in started["run"]["steps"] if s["statusLabel"] == "waiting"]
        assert gate["approval"] == {
            "prompt": "Publish?",
            "input": ["TICKET", "NOTE"],
            "required": ["TICKET"],
        }
        attempt = started["run"]["attemptId"]
        base = {"name": "gated", "dagRunId": "g-1", "stepName": "publish"}
        before = await snapshot(db_url)
        err = refused(
            await execute(c, action="approve", **base, attemptId="stale", inputs={"TICKET": "T"}),
            "conflict",
        )
        assert err["details"]["attemptId"] == attempt
        refused(await execute(c, action="approve", **base, inputs={}), "invalid_tool_input")
        refused(
            await execute(c, action="approve", **base, inputs={"TICKET": 1}),
            "invalid_tool_input",
            "inputs",
        )
        err = refused(
            await execute(c, action="approve", name="gated", dagRunId="g-1", stepName="build"),
            "conflict",
        )
        assert "succeeded" in err["message"]
        refused(
            await execute(c, action="approve", name="gated", dagRunId="g-1", stepName="zzz"),
            "resource_not_found",
        )
        assert await snapshot(db_url) == before
        # push back: build runs again with the feedback, then the gate waits again
        pushed = ok(
            await execute(
                c,
                action="push_back",
                **base,
                attemptId=attempt,
                inputs={"NOTE": "again"},
                wait=True,
            )
        )
        assert pushed["statusLabel"] == "waiting" and pushed["stepName"] == "publish"
        assert pushed["run"]["attemptId"] != attempt
        assert (tmp_path / "log").read_text().split() == [
            "build--",
            "publish",
            "build-1-again",
            "publish",
        ]
        approved = ok(await execute(c, action="approve", **base, inputs={"TICKET": "T-9"}))
        assert approved["subscribe"] and "statusLabel" in approved
        read = await c.result("resources/read", {"uri": approved["runUri"]}, capabilities=PLAIN)
        assert '"dagRunId":"g-1"' in read["contents"][0]["text"]
        # a second run: reject ends it rejected
        ok(await execute(c, action="start", name="gated", wait=True, dagRunId="g-2"))
        rejected = ok(
            await execute(
                c,
                action="reject",
                name="gated",
                dagRunId="g-2",
                stepName="publish",
                reason="no",
                wait=True,
            )
        )
        assert (rejected["completed"], rejected["statusLabel"]) == (True, "rejected")


async def test_human_task_forms_and_push_back(
    mcp_server: ServeFn, client: Client, tmp_path: Path, db_url: str
) -> None:
    async with mcp_server(dag_app(tmp_path)) as url:
        c = client(url)
        out = ok(await execute(c, action="start", name="task", wait=True, dagRunId="t-1"))
        (step,) = [s for s in out["run"]["steps"] if s["statusLabel"] == "waiting"]
        assert step["humanTask"]["prompt"] == "How many?"
        assert step["humanTask"]["form"]["required"] == ["qty"]
        base = {"name": "task", "dagRunId": "t-1", "stepName": "count"}
        before = await snapshot(db_url)
        refused(await execute(c, action="reject", **base), "invalid_tool_input", "action")
        refused(
            await execute(c, action="approve", **base, inputs={"qty": "3"}), "invalid_tool_input"
        )
        refused(await execute(c, action="approve", **base, inputs={"qty": 0}), "invalid_tool_input")
        refused(await execute(c, action="approve", **base), "invalid_tool_input")
        refused(
            await execute(c, action="push_back", **base, inputs={"other": "x"}),
            "invalid_tool_input",
        )
        assert await snapshot(db_url) == before
        back = ok(await execute(c, action="push_back", **base, inputs={"why": "redo"}, wait=True))
        assert back["statusLabel"] == "waiting"
        assert (tmp_path / "log").read_text().split() == ["prep", "prep"]
        done = ok(await execute(c, action="approve", **base, inputs={"qty": 3}, wait=True))
        assert (done["completed"], done["statusLabel"]) == (True, "succeeded")
        assert (tmp_path / "log").read_text().split()[-1] == "qty=3"


WORDS = """
name: words
steps:
  - name: draft
    command: 'echo "draft-${reason}-${decision}" >> {log}'
  - name: review
    command: "true"
    depends: draft
    approval:
      input: [reason, decision]
      rewind_to: draft
  - id: form
    action: human.task
    depends: review
    with:
      prompt: Why?
      form:
        type: object
        properties:
          reason: {type: string}
          decision: {type: string}
        required: [reason, decision]
  - name: use
    depends: form
    command: 'echo "use-${steps.form.outputs.reason}-${steps.form.outputs.decision}" >> {log}'
"""


async def test_inputs_named_reason_and_decision_are_inputs_like_any_other(
    mcp_server: ServeFn, client: Client, tmp_path: Path
) -> None:
    """Only the action's own arguments are not inputs: a push-back's `reason` and `decision`
    inputs reach the rewound step, a task's `reason` and `decision` fields its outputs."""
    log = tmp_path / "log"
    app = App()
    app.dag(WORDS.replace("{log}", str(log)))
    async with mcp_server(app) as url:
        c = client(url)
        base = {"name": "words", "dagRunId": "w-1"}
        ok(await execute(c, action="start", **base, wait=True, waitTimeoutSeconds=10))
        feedback = {"reason": "again", "decision": "reject"}
        back = ok(
            await execute(
                c, action="push_back", **base, stepName="review", inputs=feedback, wait=True
            )
        )
        assert (back["completed"], back["statusLabel"]) == (False, "waiting"), back
        ok(await execute(c, action="approve", **base, stepName="review", wait=True))
        values = {"reason": "fine", "decision": "go"}
        end = ok(
            await execute(c, action="approve", **base, stepName="form", inputs=values, wait=True)
        )
        assert (end["completed"], end["statusLabel"]) == (True, "succeeded"), end
    assert log.read_text().split() == ["draft--", "draft-again-reject", "use-fine-go"]


async def test_retry_from_a_step_stop_timeout_queue_and_singleton(
    mcp_server: ServeFn, client: Client, tmp_path: Path
) -> None:
    async with mcp_server(dag_app(tmp_path), queues="q1=1") as url:
        c = client(url)
        failed = ok(await execute(c, action="start", name="flaky", wait=True, dagRunId="f-1"))
        assert (failed["completed"], failed["statusLabel"]) == (True, "failed")
        (tmp_path / "marker").write_text("x")
        again = ok(
            await execute(
                c,
                action="retry",
                name="flaky",
                dagRunId="f-1",
                stepName="two",
                includeDownstream=True,
                wait=True,
            )
        )
        assert (again["completed"], again["statusLabel"]) == (True, "succeeded")
        assert (tmp_path / "log").read_text().split() == ["one", "two", "three"]  # one kept

        # enqueue under a queue limit of 1: the second waits queued
        first = ok(await execute(c, action="enqueue", name="slow", dagRunId="s-1"))
        assert first["subscribe"]
        timed = ok(
            await execute(
                c, action="enqueue", name="slow", dagRunId="s-2", wait=True, waitTimeoutSeconds=1
            )
        )
        assert (timed["completed"], timed["statusLabel"]) == (False, "queued")
        assert "run" not in timed  # Dagu: a wait that timed out reports no run detail
        refused(
            await execute(c, action="enqueue", name="slow", singleton=True), "conflict", "singleton"
        )
        stopped = ok(
            await execute(
                c, action="stop", name="slow", dagRunId="s-1", wait=True, waitTimeoutSeconds=20
            )
        )
        assert (stopped["completed"], stopped["statusLabel"]) == (True, "aborted")
        refused(await execute(c, action="stop", name="slow", dagRunId="s-1"), "conflict")
        refused(await execute(c, action="stop", name="slow", dagRunId="nope"), "resource_not_found")


async def test_enqueue_on_the_queue_named_after_the_dag_runs_it(
    mcp_server: ServeFn, client: Client, tmp_path: Path
) -> None:
    """Dagu's default queue of a DAG is named after it: `queue` equal to the DAG's name is
    that queue, not an unknown one; another unconfigured name is `resource_not_found`."""
    async with mcp_server(dag_app(tmp_path)) as url:
        c = client(url)
        out = ok(await execute(c, action="enqueue", name="quick", queue="quick", wait=True))
        assert (out["completed"], out["statusLabel"]) == (True, "succeeded"), out
        refused(
            await execute(c, action="enqueue", name="quick", queue="elsewhere"),
            "resource_not_found",
            "queue",
        )


async def test_inline_spec_shell_is_refused_by_default(
    mcp_server: ServeFn, client: Client, tmp_path: Path, db_url: str
) -> None:
    async with mcp_server(dag_app(tmp_path)) as url:
        c = client(url)
        before = await snapshot(db_url)
        spec = "steps:\n  - name: x\n    command: echo hi\n"
        refused(
            await execute(c, action="start", name="inline1", spec=spec),
            "invalid_tool_input",
            "spec",
        )
        refused(await execute(c, action="start", name="quick", spec=spec), "conflict", "name")
        assert await snapshot(db_url) == before


async def test_an_inline_spec_name_follows_daguss_dag_name_rule(
    mcp_server: ServeFn, client: Client, tmp_path: Path, db_url: str
) -> None:
    """An inline DAG's name is Dagu's: letters, digits, `_ . -`, at most 40 characters; any
    other is `invalid_tool_input` naming `name` and changes nothing."""
    app = dag_app(tmp_path)

    @app.action("noop")
    async def noop() -> str:
        return "done"

    spec = "steps:\n  - name: x\n    run: noop\n"
    async with mcp_server(app) as url:
        c = client(url)
        before = await snapshot(db_url)
        for bad in ("../../etc/passwd", "a b", "..", "x" * 41, "etl/daily"):
            err = refused(
                await execute(c, action="start", name=bad, spec=spec), "invalid_tool_input", "name"
            )
            assert err["dagName"] == bad, err
        assert await snapshot(db_url) == before
        for good in ("etl.daily", "probe.v2", "9lives", "x" * 40):
            out = ok(await execute(c, action="start", name=good, spec=spec, wait=True))
            assert (out["dagName"], out["statusLabel"]) == (good, "succeeded"), out


async def test_roles_reader_unauthorized_changes_nothing(
    mcp_server: ServeFn, client: Client, tmp_path: Path, db_url: str
) -> None:
    reader, reader_entry = new_token("ann", "reader")
    operator, operator_entry = new_token("bob", "operator")
    async with mcp_server(dag_app(tmp_path), api_tokens=f"{reader_entry},{operator_entry}") as url:
        c = client(url)
        as_op = {"Authorization": f"Bearer {operator}"}
        as_reader = {"Authorization": f"Bearer {reader}"}
        args = {"action": "start", "name": "gated", "dagRunId": "r-1", "wait": True}
        res = await c.result(
            "tools/call",
            {"name": "dagu_execute", "arguments": args},
            capabilities=PLAIN,
            headers=as_op,
        )
        attempt = ok(res)["run"]["attemptId"]
        before = await snapshot(db_url)
        decide = {
            "action": "approve",
            "name": "gated",
            "dagRunId": "r-1",
            "stepName": "publish",
            "inputs": {"TICKET": "T"},
            "attemptId": attempt,
        }
        res = await c.result(
            "tools/call",
            {"name": "dagu_execute", "arguments": decide},
            capabilities=PLAIN,
            headers=as_reader,
        )
        refused(res, "unauthorized")
        assert await snapshot(db_url) == before
        read = await c.result(
            "tools/call",
            {"name": "dagu_read", "arguments": {"uri": "dagu://runs/gated/r-1"}},
            capabilities=PLAIN,
            headers=as_reader,
        )
        assert ok(read)["attemptId"] == attempt


async def test_a_dag_started_as_a_task_and_answered_through_tasks_update(
    mcp_server: ServeFn, client: Client, tmp_path: Path, db_url: str
) -> None:
    async with mcp_server(dag_app(tmp_path)) as url:
        c = client(url)
        params = {"name": "start_served", "arguments": {"body": {}}}
        first = await c.result("tools/call", params, headers={"Idempotency-Key": "k-1"})
        second = await c.result("tools/call", params, headers={"Idempotency-Key": "k-1"})
        task_id = first["taskId"] if "taskId" in first else first["task"]["taskId"]
        again = second["taskId"] if "taskId" in second else second["task"]["taskId"]
        assert task_id == again
        task = await c.wait_task(task_id, {"input_required"})
        (key,) = task["inputRequests"]
        await c.result(
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {key: {"action": "accept", "content": {"decision": "approve"}}},
            },
        )
        done = await c.wait_task(task_id, {"completed", "failed"})
        assert done["status"] == "completed", done
    conn = await asyncpg.connect(direct_url(db_url))
    try:
        assert await conn.fetchval("SELECT count(*) FROM executions WHERE workflow='served'") == 1
    finally:
        await conn.close()
