"""SIGKILL the whole `tether serve` process while a task is parked on an approval: a new server
process on the same database shows the same task with the same input request key, accepts the
answer, and the run completes (a crash loses nothing)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Workers, free_port, wait_exit
from tests.mcp_client import McpClient

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.slow]

APP = "tether.examples:app"


SERVER_ENV = {
    "TETHER_POLL_INTERVAL_MS": "100",
    "TETHER_LEASE_S": "2",
    "TETHER_STATE_KEY": "test-key",
    "TETHER_JANITOR_INTERVAL_S": "3600",
}


class Servers(Workers):
    """`python -m tether serve APP --port P` processes of one test."""

    def spawn_server(self, label: str, port: int) -> subprocess.Popen[bytes]:
        return self.spawn(label, "serve", APP, "--port", str(port), **SERVER_ENV)


@pytest.fixture
def servers(db_url: str, tmp_path: Path) -> Iterator[Servers]:
    ss = Servers(db_url, tmp_path, APP)
    try:
        yield ss
    finally:
        ss.kill_all()


async def wait_ready(servers: Servers, label: str, proc: subprocess.Popen[bytes], port: int) -> str:
    """Poll /healthz until the server reports ok with its listener ready (bounded); the MCP URL."""
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(timeout=2.0) as http, asyncio.timeout(30):
        while True:
            assert proc.poll() is None, f"{label} exited {proc.returncode}:\n{servers.log(label)}"
            try:
                resp = await http.get(f"{base}/healthz")
                if resp.status_code == 200 and resp.json().get("listening"):
                    return f"{base}/mcp"
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)


async def test_a_parked_task_survives_a_sigkilled_server_and_completes_on_a_new_one(
    servers: Servers,
) -> None:
    """Same task id, same inputRequests key after SIGKILL + restart; the answer completes it."""
    port = free_port()
    first = servers.spawn_server("server1", port)
    url = await wait_ready(servers, "server1", first, port)
    c1 = McpClient(url, timeout=10)
    try:
        created = await c1.result(
            "tools/call",
            {
                "name": "start_document_review",
                "arguments": {"body": {"title": "Plan", "body": "survive a crash"}},
            },
        )
        assert created["resultType"] == "task"
        task_id = created["taskId"]
        parked = await c1.wait_task(task_id, {"input_required"}, timeout=15)
        (key,) = parked["inputRequests"]
    finally:
        await c1.aclose()

    first.send_signal(signal.SIGKILL)
    code = await wait_exit(first, 10)
    assert code == -signal.SIGKILL, f"server 1 exited {code}:\n{servers.log('server1')}"

    second = servers.spawn_server("server2", port)
    url = await wait_ready(servers, "server2", second, port)
    c2 = McpClient(url, timeout=10)
    try:
        again = await c2.result("tasks/get", {"taskId": task_id})
        assert again["taskId"] == task_id
        assert again["status"] == "input_required"
        assert again["inputRequests"] == parked["inputRequests"]  # same key, same request
        assert again["createdAt"] == parked["createdAt"]

        ack = await c2.result(
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {
                    key: {"action": "accept", "content": {"decision": "approve", "ticket": "T-1"}}
                },
            },
        )
        assert set(ack) <= {"resultType", "_meta"}
        done = await c2.wait_task(task_id, {"completed"}, timeout=15)
    finally:
        await c2.aclose()

    assert done["result"]["isError"] is False
    assert done["result"]["structuredContent"] == {
        "title": "Plan",
        "decision": "approved",
        "ticket": "T-1",
        "rounds": 1,
    }
