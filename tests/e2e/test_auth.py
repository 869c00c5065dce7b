"""API tokens and roles on the MCP endpoint (docs/security.md): readers read, operators mutate,
every tasks/* method counts as a mutation, and a server off loopback without tokens fails
closed for mutations."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from tests.e2e.conftest import ServeFn
from tests.mcp_client import McpClient
from tether.examples import app
from tether.jsonrpc import codes
from tether.security import new_token

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

START = {"name": "start_long_job", "arguments": {"body": {"steps": 1, "pause_seconds": 0}}}


async def test_tokens_gate_reads_and_mutations_by_role(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """No token → 401 with a Bearer challenge; a reader may discover, list and read status but
    not start runs or poll tasks (403); an operator may do both."""
    reader, reader_entry = new_token("ann", "reader")
    operator, operator_entry = new_token("bob", "operator")
    async with mcp_server(app, api_tokens=f"{reader_entry},{operator_entry}") as url:
        c = client(url)
        anonymous = await c.request("server/discover")
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        assert anonymous.json()["error"]["code"] == codes.UNAUTHENTICATED
        wrong = await c.request("tools/list", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401

        as_reader = {"Authorization": f"Bearer {reader}"}
        as_operator = {"Authorization": f"Bearer {operator}"}
        assert (await c.request("tools/list", headers=as_reader)).status_code == 200
        refused = await c.request("tools/call", START, headers=as_reader)
        assert (refused.status_code, refused.json()["error"]["code"]) == (403, codes.UNAUTHORIZED)

        created = (await c.request("tools/call", START, headers=as_operator)).json()["result"]
        task_id = created["taskId"]
        poll = await c.request("tasks/get", {"taskId": task_id}, headers=as_reader)
        assert (poll.status_code, poll.json()["error"]["code"]) == (403, codes.UNAUTHORIZED)
        assert (
            await c.request("tasks/get", {"taskId": task_id}, headers=as_operator)
        ).status_code == 200
        status = await c.request(
            "tools/call",
            {"name": "long_job_status", "arguments": {"handle": task_id}},
            headers=as_reader,
        )
        assert status.status_code == 200 and status.json()["result"]["isError"] is False


async def test_off_loopback_without_tokens_mutations_fail_closed(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """Bound to a non-loopback address with no tokens: reads work, mutations are refused."""
    async with mcp_server(app, host="0.0.0.0") as url:  # noqa: S104 — the setting under test
        c = client(url)
        assert (await c.request("tools/list")).status_code == 200
        refused = await c.request("tools/call", START)
        assert (refused.status_code, refused.json()["error"]["code"]) == (403, codes.UNAUTHORIZED)
    async with mcp_server(app, host="0.0.0.0", allow_unauthenticated=True) as url:  # noqa: S104
        assert (await client(url).request("tools/call", START)).status_code == 200


async def test_actions_leave_an_audit_line_with_the_principal_and_polls_do_not(
    mcp_server: ServeFn, client: Callable[[str], McpClient], caplog: pytest.LogCaptureFixture
) -> None:
    """One audit line per tool call (and per tasks/update or tasks/cancel),
    naming the principal; a tasks/get poll leaves none, and no line holds the task id."""
    operator, operator_entry = new_token("bob", "operator")
    as_operator = {"Authorization": f"Bearer {operator}"}
    caplog.set_level(logging.INFO, logger="tether.audit")
    async with mcp_server(app, api_tokens=operator_entry) as url:
        c = client(url)
        created = (await c.request("tools/call", START, headers=as_operator)).json()["result"]
        task_id = created["taskId"]
        for _ in range(3):
            poll = await c.request("tasks/get", {"taskId": task_id}, headers=as_operator)
            assert poll.status_code == 200
        cancelled = await c.request("tasks/cancel", {"taskId": task_id}, headers=as_operator)
        assert cancelled.status_code == 200
    lines = [r.getMessage() for r in caplog.records if r.name == "tether.audit"]
    assert lines == ["tools/call start_long_job by bob", "tasks/cancel - by bob"]


async def test_health_answers_an_anonymous_probe_without_revealing_the_app(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """Our choice (Kubernetes probes carry no token): with tokens configured, an anonymous
    /healthz gets `{"status": "ok"}` and nothing else; a token holder gets the details."""
    reader, reader_entry = new_token("ann", "reader")
    async with mcp_server(app, api_tokens=reader_entry) as url:
        http = client(url).http
        base = url.rsplit("/", 1)[0]
        anonymous = await http.get(f"{base}/healthz")
        assert (anonymous.status_code, anonymous.json()) == (200, {"status": "ok"})
        wrong = await http.get(f"{base}/healthz", headers={"Authorization": "Bearer nope"})
        assert wrong.json() == {"status": "ok"}
        known = await http.get(f"{base}/healthz", headers={"Authorization": f"Bearer {reader}"})
        assert known.status_code == 200 and "long_job" in known.json()["workflows"]
