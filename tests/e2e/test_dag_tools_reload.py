"""DAG files added, changed and removed while `serve --dags DIR` runs: their MCP tools follow
without a restart, and a `subscriptions/listen` stream that asked for `toolsListChanged` is
told each time (core schema: ToolListChangedNotification, SubscriptionFilter)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ServeFn
from tests.mcp_client import McpClient
from tests.sse import Stream, listen
from tests.waiting import until
from tether.runtime.registry import App
from tether.tools.live import LiveCatalog

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

SUB = "io.modelcontextprotocol/subscriptionId"
CHANGED = {
    "jsonrpc": "2.0",
    "method": "notifications/tools/list_changed",
    "params": {"_meta": {SUB: 40}},
}


def reload_app() -> App:
    app = App("reload")

    @app.action("double")
    def double(n: int = 1) -> int:
        return 2 * n

    return app


def dag(name: str, *, mcp: bool = True, description: str = "") -> str:
    return (
        f"name: {name}\ndescription: '{description or name}'\nmcp: {str(mcp).lower()}\n"
        "steps:\n  - name: one\n    run: double\n    with: {n: 2}\n"
    )


async def tool_names(c: McpClient) -> set[str]:
    return {t["name"] for t in (await c.result("tools/list"))["tools"]}


class Frames:
    """Every message of a listen stream, read in the background (a read that times out would
    end the SSE reader): `next()` waits for one."""

    def __init__(self, stream: Stream) -> None:
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.task = asyncio.create_task(self._read(stream))

    async def _read(self, stream: Stream) -> None:
        while True:
            self.queue.put_nowait(await stream.next(timeout=60))

    async def next(self, timeout: float = 10.0) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            return await self.queue.get()

    def close(self) -> None:
        self.task.cancel()


@contextlib.asynccontextmanager
async def frames(c: McpClient, notifications: dict[str, Any]) -> AsyncIterator[Frames]:
    async with listen(c, notifications) as stream:
        read = Frames(stream)
        try:
            yield read
        finally:
            read.close()


@pytest.fixture
def rebuilds(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What each rebuild of the served tools/list found, in order: True when the list changed
    and listen streams were told (a frame follows), False when nothing is sent."""
    found: list[bool] = []
    refresh = LiveCatalog.refresh

    def recorded(catalog: LiveCatalog) -> bool:
        found.append(refresh(catalog))
        return found[-1]

    monkeypatch.setattr(LiveCatalog, "refresh", recorded)
    return found


async def test_a_dag_file_added_changed_and_removed_changes_the_tools_and_tells_listeners(
    mcp_server: ServeFn, client: Callable[[str], McpClient], tmp_path: Path, rebuilds: list[bool]
) -> None:
    (tmp_path / "first.yaml").write_text(dag("first"))
    app = reload_app()
    async with mcp_server(app, dags=tmp_path, dags_reload_s=0.05) as url:
        c = client(url)
        discover = await c.result("server/discover")
        assert discover["capabilities"]["tools"] == {"listChanged": True}
        assert {"start_first", "first_status", "dagu_execute"} <= await tool_names(c)
        async with frames(c, {"toolsListChanged": True, "promptsListChanged": True}) as stream:
            ack = await stream.next()
            assert ack["params"]["notifications"] == {"toolsListChanged": True}

            (tmp_path / "second.yaml").write_text(dag("second"))
            assert await stream.next() == CHANGED
            assert {"start_second", "second_status", "second_watch"} <= await tool_names(c)
            started = await c.result(
                "tools/call", {"name": "start_second", "arguments": {"body": {}}}
            )
            done = await c.wait_task(started["taskId"], {"completed", "failed"})
            assert done["status"] == "completed", done

            # A DAG without mcp: true changes no tools/list entry: no frame.
            rebuilds.clear()
            (tmp_path / "quiet.yaml").write_text(dag("quiet", mcp=False))
            # the list is rebuilt in the same step that registers the DAG
            await until(lambda: "quiet" in app.dags, what="the quiet DAG loaded")
            assert rebuilds == [False]

            (tmp_path / "first.yaml").write_text(dag("first", description="now changed"))
            assert await stream.next() == CHANGED
            listed = {t["name"]: t for t in (await c.result("tools/list"))["tools"]}
            assert listed["start_first"]["description"].startswith("now changed")

            (tmp_path / "second.yaml").unlink()
            assert await stream.next() == CHANGED
            assert not {"start_second", "second_status"} & await tool_names(c)
            gone = await c.call("tools/call", {"name": "start_second", "arguments": {}})
            assert "Unknown tool" in gone["error"]["message"], gone


async def test_a_broken_edit_keeps_the_tools_and_a_2025_client_is_not_promised_changes(
    mcp_server: ServeFn,
    client: Callable[[str], McpClient],
    tmp_path: Path,
    rebuilds: list[bool],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A file broken by an edit keeps the DAG it held (and its tools; nothing is sent); a
    2025 `initialize` is told `listChanged: false` (it has no stream to hear it on)."""
    (tmp_path / "first.yaml").write_text(dag("first"))
    app = reload_app()
    async with mcp_server(app, dags=tmp_path, dags_reload_s=0.05) as url:
        c = client(url)
        legacy = await c.post(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "legacy", "version": "1"},
                },
            },
            {"Content-Type": "application/json", "Accept": "application/json"},
        )
        assert legacy.json()["result"]["capabilities"]["tools"] == {"listChanged": False}
        async with frames(c, {"toolsListChanged": True}) as stream:
            await stream.next()  # the ack
            rebuilds.clear()
            (tmp_path / "first.yaml").write_text("name: first\nsteps: [{name: x, bogus: 1}]\n")
            await until(lambda: "refused" in caplog.text, what="the broken file refused")
            assert rebuilds == []  # nothing rebuilt: nothing to tell
        assert app.dags["first"].text == dag("first")
        assert "start_first" in await tool_names(c)


async def test_without_a_dag_directory_tool_list_changes_are_not_agreed(
    mcp_server: ServeFn, client: Callable[[str], McpClient]
) -> None:
    """A server whose tools cannot change says so, and a listen for toolsListChanged alone
    agrees nothing and ends at once."""
    async with mcp_server(reload_app()) as url:
        c = client(url)
        discover = await c.result("server/discover")
        assert discover["capabilities"]["tools"] == {"listChanged": False}
        async with listen(c, {"toolsListChanged": True}) as stream:
            messages = await stream.rest(timeout=5)
    assert messages[0]["params"]["notifications"] == {}
    assert messages[-1]["result"]["resultType"] == "complete"
