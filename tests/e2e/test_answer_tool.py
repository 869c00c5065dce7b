"""Every wait answerable with plain MCP tools, over real HTTP: `answer_<wf>` answers signals,
approvals, human tasks and agent steps through the one runtime `answer` path, with the same
results and refusals as `tasks/update`. Our choice (docs/answering-waits.md has the rules)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from tests.apps.answering import app
from tests.e2e.conftest import ServeFn
from tests.mcp_client import TASKS, McpClient
from tether.jsonrpc import codes
from tether.security import new_token

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

PLAIN: dict[str, Any] = {}  # a client with no Tasks extension and no elicitation
TASKS_ONLY: dict[str, Any] = {"extensions": {TASKS: {}}}
Client = Callable[[str], McpClient]


async def tool(c: McpClient, name: str, arguments: dict[str, Any], **kw: Any) -> dict[str, Any]:
    kw.setdefault("capabilities", PLAIN)
    return await c.result("tools/call", {"name": name, "arguments": arguments}, **kw)


def ok(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is False, result
    structured: dict[str, Any] = result["structuredContent"]
    return structured


def error(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is True, result
    err: dict[str, Any] = result["structuredContent"]["error"]
    return err


async def start(c: McpClient, wf: str) -> str:
    started = ok(await tool(c, f"start_{wf}", {"body": {}}))
    handle: str = started["execution_id"]
    return handle


async def status_until(
    c: McpClient, wf: str, handle: str, done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Poll the status tool (the plain client's way) until `done` holds; bounded."""
    async with asyncio.timeout(10):
        while True:
            status = ok(await tool(c, f"{wf}_status", {"handle": handle}))
            if done(status):
                return status
            await asyncio.sleep(0.02)


def waiting(status: dict[str, Any]) -> bool:
    return status["state"] == "waiting" and bool(status.get("waits"))


def ended(status: dict[str, Any]) -> bool:
    return "ended_at" in status


async def answer(c: McpClient, wf: str, handle: str, wait: str, response: Any) -> dict[str, Any]:
    return await tool(c, f"answer_{wf}", {"handle": handle, "wait": wait, "response": response})


async def test_a_plain_mcp_client_answers_an_approval_with_the_answer_tool(
    mcp_server: ServeFn, client: Client
) -> None:
    """start → status shows the wait and how to answer it → a missing required input is
    refused and changes nothing → answered by name → repeats are no-ops, a different answer
    is refused → the run completes. No Tasks extension anywhere."""
    async with mcp_server(app) as url:
        c = client(url)
        listed = await c.result("tools/list", capabilities=PLAIN)
        assert "answer_gate" in [t["name"] for t in listed["tools"]]
        handle = await start(c, "gate")
        status = await status_until(c, "gate", handle, waiting)
        (wait,) = status["waits"]
        assert (wait["kind"], wait["name"], wait["required"]) == ("approval", "publish", ["ticket"])
        assert wait["answer_with"] == {
            "tool": "answer_gate",
            "arguments": {
                "handle": handle,
                "wait": "publish",
                "response": {"decision": "approve", "ticket": "..."},
            },
        }
        assert any("answer_gate" in h for h in status["hints"])
        assert not any("tasks/update" in h for h in status["hints"])  # not for this client

        refused = error(await answer(c, "gate", handle, "publish", {"decision": "approve"}))
        assert refused["code"] == "invalid_tool_input"
        assert any("ticket" in v for v in refused["violations"])
        after = ok(await tool(c, "gate_status", {"handle": handle}))
        assert (after["run_version"], after["waits"]) == (status["run_version"], status["waits"])

        response = {"decision": "approve", "ticket": "CHG-42"}
        accepted = ok(await answer(c, "gate", handle, "publish", response))
        assert (accepted["status"], accepted["key"]) == ("accepted", wait["key"])
        again_by_name = ok(await answer(c, "gate", handle, "publish", response))
        again_by_key = ok(await answer(c, "gate", handle, wait["key"], response))
        assert again_by_name["status"] == again_by_key["status"] == "duplicate"
        other = {"decision": "reject", "reason": "changed my mind"}
        for ref in ("publish", wait["key"]):
            assert error(await answer(c, "gate", handle, ref, other))["code"] == "conflict"

        final = await status_until(c, "gate", handle, ended)
        assert final["state"] == "completed"
        assert final["output"] == {"decision": "approved", "inputs": {"ticket": "CHG-42"}}


async def test_a_stale_key_is_refused_naming_the_wait_open_now(
    mcp_server: ServeFn, client: Client
) -> None:
    """An unrelated signal re-parks the run under a new key; the old key's error names the
    open wait (key, kind, name) so the caller retries with it."""
    async with mcp_server(app) as url:
        c = client(url)
        handle = await start(c, "gate")
        first = (await status_until(c, "gate", handle, waiting))["waits"][0]["key"]
        sent = ok(await tool(c, "signal_gate", {"handle": handle, "name": "nudge"}))
        assert sent["status"] == "accepted"
        status = await status_until(
            c, "gate", handle, lambda s: waiting(s) and s["waits"][0]["key"] != first
        )
        now = status["waits"][0]["key"]
        stale = error(
            await answer(c, "gate", handle, first, {"decision": "approve", "ticket": "T"})
        )
        assert stale["code"] == "conflict"
        assert stale["open_waits"] == [{"key": now, "kind": "approval", "name": "publish"}]
        assert stale["open_keys"] == [now] and now in stale["message"]
        retried = ok(await answer(c, "gate", handle, now, {"decision": "approve", "ticket": "T"}))
        assert retried["status"] == "accepted"


async def test_unknown_and_shared_names_are_refused_listing_the_open_waits(
    mcp_server: ServeFn, client: Client
) -> None:
    """A name no open wait has, or one two open waits share, is refused with the open waits;
    answering each by key then works, one by one."""
    async with mcp_server(app) as url:
        c = client(url)
        handle = await start(c, "both")
        status = await status_until(c, "both", handle, waiting)
        keys = {w["kind"]: w["key"] for w in status["waits"]}
        assert all(w["answer_with"]["arguments"]["wait"] == w["key"] for w in status["waits"])
        for ref in ("x", "y"):
            refused = error(await answer(c, "both", handle, ref, {"decision": "approve"}))
            assert refused["code"] == "conflict"
            assert sorted(w["key"] for w in refused["open_waits"]) == sorted(keys.values())
        assert ok(await answer(c, "both", handle, keys["signal"], 7))["status"] == "accepted"
        decision = {"decision": "approve"}
        assert ok(await answer(c, "both", handle, "x", decision))["status"] == "accepted"
        final = await status_until(c, "both", handle, ended)
        assert final["output"] == [7, "Approved"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"title": 1}, "title"),
        ({"count": "three"}, "count"),
        ({"count": 1.5}, "count"),
        ({"ratio": "half"}, "ratio"),
        ({"ok": "yes"}, "ok"),
        ({"title": None}, "title"),
    ],
)
async def test_a_human_task_refuses_each_wrong_scalar_type(
    mcp_server: ServeFn, client: Client, fields: dict[str, Any], field: str
) -> None:
    """The typed form is checked field by field; the violation names the field and the
    wait stays as it was. A missing required field is refused the same way."""
    good = {"title": "t", "count": 3, "ratio": 0.5, "ok": True}
    async with mcp_server(app) as url:
        c = client(url)
        handle = await start(c, "form")
        before = await status_until(c, "form", handle, waiting)
        refused = error(await answer(c, "form", handle, "fill", {**good, **fields}))
        assert refused["code"] == "invalid_tool_input"
        assert any(v.startswith(f"{field}:") for v in refused["violations"]), refused
        missing = {k: v for k, v in good.items() if k != field}
        assert error(await answer(c, "form", handle, "fill", missing))["code"] == (
            "invalid_tool_input"
        )
        after = ok(await tool(c, "form_status", {"handle": handle}))
        assert (after["run_version"], after["waits"]) == (before["run_version"], before["waits"])
        assert ok(await answer(c, "form", handle, "fill", good))["status"] == "accepted"
        final = await status_until(c, "form", handle, ended)
        assert final["output"] == {"values": good}


async def test_signals_and_agent_steps_are_answered_against_their_schemas(
    mcp_server: ServeFn, client: Client
) -> None:
    async with mcp_server(app) as url:
        c = client(url)
        for wf, wait, bad, good, out in (
            ("sig", "go", {"n": "x"}, {"n": 4}, {"n": 4}),
            ("agent", "summarise", {}, {"summary": "s"}, {"summary": "s"}),
        ):
            handle = await start(c, wf)
            await status_until(c, wf, handle, waiting)
            assert error(await answer(c, wf, handle, wait, bad))["code"] == "invalid_tool_input"
            assert ok(await answer(c, wf, handle, wait, good))["status"] == "accepted"
            assert (await status_until(c, wf, handle, ended))["output"] == out


async def test_the_task_status_message_names_the_answer_tool_and_the_key(
    mcp_server: ServeFn, client: Client
) -> None:
    """A Tasks client without form elicitation sees `working`; its statusMessage names
    answer_<wf> and tasks/update with the wait's key (not signal_<wf>, which cannot answer
    an approval)."""
    async with mcp_server(app) as url:
        c = client(url)
        created = await tool(c, "start_gate", {"body": {}}, capabilities=TASKS_ONLY)
        task_id = created["taskId"]
        async with asyncio.timeout(10):
            while True:
                task = await c.result("tasks/get", {"taskId": task_id}, capabilities=TASKS_ONLY)
                if "approval" in task.get("statusMessage", ""):
                    break
                await asyncio.sleep(0.02)
        message = task["statusMessage"]
        assert task["status"] == "working"
        assert "answer_gate" in message and "tasks/update" in message
        assert f"{task_id}:approval:publish:" in message and "signal_gate" not in message


async def test_only_operators_answer_and_each_answer_is_audited(
    mcp_server: ServeFn, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """answer_<wf> is a mutation: a reader is refused with 403 before anything
    changes; an operator's answer leaves one audit line naming the tool and the principal."""
    reader, reader_entry = new_token("ann", "reader")
    operator, operator_entry = new_token("bob", "operator")
    as_reader: dict[str, str | None] = {"Authorization": f"Bearer {reader}"}
    as_operator: dict[str, str | None] = {"Authorization": f"Bearer {operator}"}
    async with mcp_server(app, api_tokens=f"{reader_entry},{operator_entry}") as url:
        c = client(url)
        started = await c.call(
            "tools/call",
            {"name": "start_sig", "arguments": {"body": {}}},
            capabilities=PLAIN,
            headers=as_operator,
        )
        handle = started["result"]["structuredContent"]["execution_id"]
        params = {
            "name": "answer_sig",
            "arguments": {"handle": handle, "wait": "go", "response": {"n": 1}},
        }
        refused = await c.request("tools/call", params, capabilities=PLAIN, headers=as_reader)
        assert (refused.status_code, refused.json()["error"]["code"]) == (403, codes.UNAUTHORIZED)
        with caplog.at_level(logging.INFO, logger="tether.audit"):
            async with asyncio.timeout(10):
                while True:  # the run parks on its signal wait shortly after the start
                    body = await c.call(
                        "tools/call", params, capabilities=PLAIN, headers=as_operator
                    )
                    if not body["result"]["isError"]:
                        break
                    assert body["result"]["structuredContent"]["error"]["code"] == "conflict"
                    await asyncio.sleep(0.02)
        assert body["result"]["structuredContent"]["status"] == "accepted"
        assert any("tools/call answer_sig by bob" in r.getMessage() for r in caplog.records)


async def test_a_start_without_body_says_where_the_input_goes(
    mcp_server: ServeFn, client: Client
) -> None:
    """An agent that gives the input's fields flat (beside `body`) is told that the input goes
    under `body` and which arguments were not it (the new-user trial)."""
    async with mcp_server(app) as url:
        c = client(url)
        for arguments in ({"title": "x", "idempotency_key": "k"}, {}):
            refused = error(await tool(c, "start_gate", arguments))
            assert refused["code"] == "invalid_tool_input"
            (violation,) = refused["violations"]
            assert violation["loc"] == ["body"]
            assert "goes under 'body'" in violation["msg"]
            assert ("(got title beside it)" in violation["msg"]) == bool(arguments)
        listed = await tool(c, "start_gate", {"body": {}})
        assert listed["isError"] is False
