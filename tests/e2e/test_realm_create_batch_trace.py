"""Realm's `create_workflow`, `start_run_batch` and `append_trace` end to end over real HTTP,
each with its refusals (the right code, and nothing created or changed)."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.conftest import direct_url
from tests.e2e.conftest import ServeFn
from tests.e2e.test_answer_tool import PLAIN, TASKS_ONLY, Client
from tests.e2e.test_realm_tools import build_app, tool
from tether.jsonrpc import codes
from tether.runtime.registry import App

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

PLAN: dict[str, Any] = {
    "metadata": {"name": "triage", "task_description": "Triage the ticket."},
    "steps": [
        {
            "id": "read",
            "description": "Read the ticket",
            "input_schema": {
                "type": "object",
                "properties": {"summary": {"type": "string"}},
                "required": ["summary"],
            },
        },
        {"id": "reply", "description": "Write the reply", "depends_on": ["read"], "color": "x"},
    ],
}


async def _runs(db_url: str) -> int:
    conn = await asyncpg.connect(direct_url(db_url))
    try:
        return int(await conn.fetchval("SELECT count(*) FROM executions"))
    finally:
        await conn.close()


async def test_create_workflow_runs_its_plan_and_refuses_a_bad_one(
    mcp_server: ServeFn, client: Client
) -> None:
    app = build_app()
    async with mcp_server(app) as url:
        c = client(url)
        made = await tool(c, "create_workflow", {**PLAN, "workflow_id": "mine", "params": {"x": 1}})
        assert made["status"] == "ok", made
        wf = made["data"]["workflow_id"]
        assert wf.startswith("triage-")
        assert made["deduped"] is False
        assert any("color" in d for d in made["diagnostics"])
        assert any("workflow_id" in d for d in made["diagnostics"])
        assert any("'params'" in d for d in made["diagnostics"])  # Realm's tool has no params
        assert made["warnings"] == made["diagnostics"]
        assert (  # Realm's agent-created workflows
            "step 'reply' takes no field 'color'; it is ignored." in (made["warnings"])
        )
        assert made["context_hint"].startswith(
            f"Run '{made['run_id']}' created for workflow '{wf}'."
        )
        brief = await tool(c, "get_workflow_protocol", {"workflow_id": wf})
        assert brief["quick_start"] == "Triage the ticket."  # metadata.task_description
        run = made["run_id"]
        (first,) = made["next_actions"]
        assert first["instruction"]["params"] == {"run_id": run, "command": "read"}

        bad = await tool(c, "execute_step", {"run_id": run, "command": "read", "params": {}})
        assert (bad["error_code"], bad["agent_action"]) == (
            "VALIDATION_INPUT_SCHEMA",
            "provide_input",
        )
        ok = await tool(
            c, "execute_step", {"run_id": run, "command": "read", "params": {"summary": "s"}}
        )
        assert ok["next_actions"][0]["instruction"]["params"]["command"] == "reply"

        task = await c.result("tasks/get", {"taskId": run}, capabilities=TASKS_ONLY)
        assert task["status"] == "working"  # a created workflow's run is an MCP task too
        assert "agent step 'reply'" in task["statusMessage"]

        again = await tool(c, "create_workflow", PLAN)  # same plan: same id, a new run
        assert again["data"]["workflow_id"] == wf
        assert again["run_id"] != run
        listed = await tool(c, "list_workflows", {})
        assert wf in [w["id"] for w in listed["workflows"]]

        before = await tool(c, "list_workflows", {})
        refused = await tool(
            c,
            "create_workflow",
            {"steps": [{"id": "a", "description": "A", "depends_on": ["later"]}]},
        )
        assert refused["status"] == "error"
        assert refused["agent_action"] == "provide_input"
        assert "error_code" not in refused
        assert (refused["run_id"], refused["run_version"]) == ("", 0)
        assert "depends_on" in refused["errors"][0]
        assert await tool(c, "list_workflows", {}) == before  # nothing registered

        app.max_created_workflows = 1  # a second, different plan is refused
        other = {"steps": [{"id": "a", "description": "A"}]}
        capped = await tool(c, "create_workflow", other)
        assert (capped["status"], capped["run_id"]) == ("error", "")
        assert "created workflows already" in capped["errors"][0]
        assert await tool(c, "list_workflows", {}) == before

        body = await c.call(
            "tools/call",
            {"name": "create_workflow", "arguments": {"steps": [{"id": "a"}]}},
            capabilities=PLAIN,
        )
        assert body["error"]["code"] == codes.INVALID_PARAMS
        assert "Required at steps.0.description" in body["error"]["message"]


async def test_start_run_batch(mcp_server: ServeFn, client: Client, db_url: str) -> None:
    async with mcp_server(build_app()) as url:
        c = client(url)
        items = [{"params": {"amount": 1}, "idempotency_key": "k1"}, {"params": {"amount": 2}}]
        out = await tool(c, "start_run_batch", {"workflow_id": "expense", "items": items})
        assert out["status"] == "ok", out
        assert (out["run_id"], out["failed"]) == ("", [])
        assert [s["params"] for s in out["started"]] == [{"amount": 1}, {"amount": 2}]
        first = out["started"][0]
        assert first["idempotency_key"] == "k1"
        assert first["deduped"] is False
        assert first["next_actions"][0]["instruction"]["params"]["command"] == "rate"
        assert first["context_hint"] == (  # Realm's start_run_batch: start_run's sentence
            f"Run '{first['run_id']}' created for workflow 'expense'. Steps for the agent: 'rate'."
        )

        # the key policy refuses per item: k1 is live, on_live_match=fail
        out = await tool(
            c,
            "start_run_batch",
            {
                "workflow_id": "expense",
                "items": [*items[:1], {"params": {"amount": 5}}],
                "on_live_match": "fail",
            },
        )
        assert [f["index"] for f in out["failed"]] == [0]
        assert out["failed"][0]["error_code"] == "STATE_RUN_ALREADY_ACTIVE"
        assert len(out["started"]) == 1
        deduped = await tool(c, "start_run_batch", {"workflow_id": "expense", "items": items[:1]})
        assert deduped["started"][0]["deduped"] is True
        assert deduped["started"][0]["run_id"] == first["run_id"]
        assert deduped["started"][0]["warnings"] == [
            f"The idempotency_key matched run '{first['run_id']}', which is still open (phase "
            "'running')."
        ]
        assert deduped["started"][0]["context_hint"] == (
            f"Run '{first['run_id']}' already holds this idempotency_key (phase 'running'); no run "
            "was started. Steps for the agent: 'rate'."
        )

        count = await _runs(db_url)
        bad = await tool(
            c,
            "start_run_batch",
            {"workflow_id": "expense", "items": [{"params": {"amount": 1}}, {"params": {}}]},
        )
        assert (bad["error_code"], bad["run_id"], bad["run_version"]) == (
            "VALIDATION_BATCH_ITEMS", "", 0,
        )  # fmt: skip
        assert bad["errors"] == [
            "1 of the 2 items have params that the workflow's params_schema refuses; "
            "error_details.failures names them."
        ]
        assert bad["error_details"]["failures"] == [
            {"index": 1, "reason": "(root) must have required property 'amount'"}
        ]
        big = await tool(
            c, "start_run_batch", {"workflow_id": "expense", "items": items, "max_items": 1}
        )
        assert big["error_code"] == "VALIDATION_BATCH_TOO_LARGE"
        assert big["error_details"] == {"count": 2, "max_items": 1}
        gone = await tool(c, "start_run_batch", {"workflow_id": "nope", "items": items})
        assert gone["error_code"] == "STATE_WORKFLOW_NOT_FOUND"
        assert await _runs(db_url) == count  # no refused batch created a run


async def test_append_trace_and_adoption(mcp_server: ServeFn, client: Client) -> None:
    async with mcp_server(build_app()) as url:
        c = client(url)
        started = await tool(c, "start_run", {"workflow_id": "expense", "params": {"amount": 3}})
        run = started["run_id"]
        entries = [{"event": "looked", "data": {"n": 1}}, {"event": "thought"}]
        mine = {"run_id": run, "step_id": "rate", "entries": entries, "writer_nonce": "w1"}
        out = await tool(c, "append_trace", mine)
        assert out["status"] == "ok", out
        assert out == {  # Realm's append_trace: the buffer's counts against the limits
            "status": "ok",
            "buffer_count": 2,
            "buffer_bytes": out["buffer_bytes"],
            "limit_count": 200,
            "limit_bytes": 102400,
            "final_limit_entries": 100,
            "final_limit_bytes": 51200,
            "file_count": 2,
            "file_bytes": out["buffer_bytes"],
            "file_limit_count": 400,
            "file_limit_bytes": 204800,
        }
        state = await tool(c, "get_run_state", {"run_id": run})
        assert state["run_version"] == started["run_version"]  # a note does not wake the run
        await tool(c, "append_trace", {**mine, "writer_nonce": "w2", "entries": entries[:1]})
        await tool(c, "append_trace", {k: v for k, v in mine.items() if k != "writer_nonce"})

        missing = await tool(c, "append_trace", {**mine, "step_id": "nope"})
        assert missing["error_code"] == "STEP_NOT_FOUND"
        assert missing["errors"] == ["Workflow 'expense' has no step 'nope'."]
        auto = await tool(c, "append_trace", {**mine, "step_id": "score"})
        assert auto["error_code"] == "STATE_STEP_NOT_ELIGIBLE"
        assert auto["error_details"]["step_type"] == "auto"
        blank = await tool(c, "append_trace", {**mine, "entries": []})  # the counts, no write
        assert (blank["status"], blank["buffer_count"], blank["file_count"]) == ("ok", 2, 5)
        for nonce, why in [("", "it is empty"), (" w1", "it starts or ends with whitespace")]:
            shaped = await tool(c, "append_trace", {**mine, "writer_nonce": nonce})
            assert shaped["error_code"] == "VALIDATION_EMPTY_VALUE"
            assert shaped["errors"][0].startswith(f"writer_nonce refused: {why}")
        long = await tool(c, "execute_step", {**answer_of(run), "writer_nonce": "n" * 129})
        assert long["errors"][0].startswith(
            "writer_nonce refused: it is longer than 128 characters"
        )
        on_auto = await tool(c, "execute_step", {**answer_of(run), "command": "score"} | nonce1)
        assert on_auto["error_code"] == "STATE_STEP_NOT_ELIGIBLE"
        assert on_auto["error_details"]["step_type"] == "auto"
        full = await tool(c, "append_trace", {**mine, "entries": [{"event": "e"}] * 199})
        assert full["error_code"] == "BUFFER_FULL"
        assert full["error_details"]["entries"] == 2  # the refused call recorded nothing

        done = await tool(
            c,
            "execute_step",
            {"run_id": run, "command": "rate", "params": {"band": "small"}, "writer_nonce": "w1"},
        )
        assert "adopted_own" in done, done
        assert (done["adopted_own"], done["adopted_anonymous"], done["preserved_foreign"]) == (
            2, 2, 1,
        )  # fmt: skip
        late = await tool(c, "append_trace", mine)
        assert late["error_code"] == "STATE_STEP_NOT_ELIGIBLE"
        assert late["error_details"]["step_state"] == "completed"
        assert late["errors"] == ["Step 'rate' is done already."]


def answer_of(run: str) -> dict[str, Any]:
    return {"run_id": run, "command": "rate", "params": {"band": "small"}}


nonce1 = {"writer_nonce": "w1"}


async def test_terminal_match_policies(mcp_server: ServeFn, client: Client) -> None:
    async with mcp_server(build_app()) as url:
        c = client(url)
        start = {"workflow_id": "expense", "params": {"amount": 1}, "idempotency_key": "once"}
        first = await tool(c, "start_run", start)
        await tool(c, "abandon_run", {"run_id": first["run_id"]})
        reused = await tool(c, "start_run", start)
        assert (reused["run_id"], reused["deduped"]) == (first["run_id"], True)
        rejected = await tool(c, "start_run", {**start, "on_terminal_match": "reject"})
        assert (rejected["error_code"], rejected["run_id"]) == ("STATE_IDEMPOTENCY_KEY_USED", "")
        rerun = await tool(c, "start_run", {**start, "on_terminal_match": "rerun"})
        assert rerun["rerun_of"] == first["run_id"]
        assert (
            f"It takes the place of run '{first['run_id']}', which held the same idempotency_key "
            "(on_terminal_match)." in rerun["context_hint"]
        )
        state = await tool(c, "get_run_state", {"run_id": rerun["run_id"]})
        assert state["rerun_of"] == first["run_id"]
        assert rerun["run_id"] != first["run_id"]
        assert rerun["next_actions"][0]["instruction"]["params"]["command"] == "rate"
        moved = await tool(c, "start_run", start)  # the key moved to the rerun
        assert (moved["run_id"], moved["deduped"]) == (rerun["run_id"], True)
        assert moved["warnings"] == [
            f"The idempotency_key matched run '{rerun['run_id']}', which is still open (phase "
            "'running')."
        ]
        assert moved["context_hint"].startswith(
            f"Run '{rerun['run_id']}' already holds this idempotency_key (phase 'running'); no "
            "run was started."
        )
        live = await tool(c, "start_run", {**start, "on_live_match": "fail"})
        assert live["error_code"] == "STATE_RUN_ALREADY_ACTIVE"
        assert live["errors"] == [  # Realm's idempotency rule: the errors name that run
            f"Run '{rerun['run_id']}' of workflow 'expense' still holds this idempotency_key "
            "(phase 'running'); no run was started."
        ]
        await tool(c, "abandon_run", {"run_id": rerun["run_id"]})
        again = await tool(c, "start_run", {**start, "on_terminal_match": "rerun_if_failed"})
        assert (again["run_id"], again["deduped"]) == (rerun["run_id"], True)  # not failed
        other = await tool(c, "start_run", {**start, "params": {"amount": 2}})  # a warning only
        assert (other["run_id"], other["deduped"]) == (rerun["run_id"], True)
        assert other["warnings"] == [
            "The idempotency_key matched a run that was started with other params; that run is "
            "returned as it was, and the params of this call were not used."
        ]


TRACED = """
id: traced
name: Traced
version: 1
steps:
  think:
    description: Think aloud
    execution: agent
    trace_schema:
      type: object
      properties: {event: {enum: [thinking, decided]}}
    trace_validation_mode: {mode}
"""


@pytest.mark.parametrize("mode", ["enforce", "warn"])
async def test_trace_schema_enforced_or_warned(
    mcp_server: ServeFn, client: Client, mode: str
) -> None:
    """Realm's agent-step controls: a trace that does not fit `trace_schema` is refused (`enforce`,
    VALIDATION_TRACE_SCHEMA, nothing recorded) or reported (`warn`)."""
    app = App(f"realm-traced-{mode}")
    app.protocol(TRACED.replace("{mode}", mode))
    async with mcp_server(app) as url:
        c = client(url)
        run = (await tool(c, "start_run", {"workflow_id": "traced"}))["run_id"]
        call = {"run_id": run, "command": "think", "params": {}, "trace": [{"event": "dozed"}]}
        out = await tool(c, "execute_step", call)
        if mode == "enforce":
            assert (out["error_code"], out["agent_action"]) == (
                "VALIDATION_TRACE_SCHEMA", "provide_input",
            )  # fmt: skip
            assert out["error_details"]["errors"][0]["instancePath"] == "/event"
            state = await tool(c, "get_run_state", {"run_id": run})
            assert state["completed_steps"] == []
        else:
            assert (out["status"], out["run_phase"]) == ("ok", "completed"), out
            assert out["warnings"] == [
                "The trace of step 'think' does not fit its trace_schema. It is kept as sent."
            ]
