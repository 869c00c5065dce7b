"""The A2A agent of the remote tests (tests/apps/a2a_agent.py) in a process of its own, and
what the tests ask it directly with the A2A SDK's own client: its tasks, one task, a cancel
from another client, the release of a hold."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from a2a.client import Client, ClientConfig, create_client
from a2a.types import CancelTaskRequest, GetTaskRequest, ListTasksRequest, Task

from tests.e2e.conftest import free_port
from tests.e2e.remotes import Process


def agent(logs: Path, store: Path | None = None) -> Process:
    """The agent on a free port; with `store`, its tasks are kept in files there (a restart
    keeps them)."""
    args = (str(store),) if store is not None else ()
    return Process("tests/apps/a2a_agent.py", free_port(), logs, args=args, path="/")


@contextlib.asynccontextmanager
async def sdk_client(process: Process) -> AsyncIterator[Client]:
    """The A2A SDK's client for the agent (its card read from the well-known path)."""
    client = await create_client(process.url, ClientConfig(streaming=False))
    try:
        yield client
    finally:
        await client.close()


async def tasks(process: Process) -> list[Task]:
    """Every task the agent holds: one per task our calls created."""
    async with sdk_client(process) as client:
        return list((await client.list_tasks(ListTasksRequest(page_size=100))).tasks)


async def task(process: Process, task_id: str) -> Task:
    async with sdk_client(process) as client:
        return await client.get_task(GetTaskRequest(id=task_id))


async def cancel(process: Process, task_id: str) -> Task:
    """Cancel the task from another client, as the agent's other users could."""
    async with sdk_client(process) as client:
        return await client.cancel_task(CancelTaskRequest(id=task_id))


async def release(process: Process, task_id: str) -> None:
    """The agent's `hold` of that task completes."""
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(f"{process.url}release/{task_id}")
    response.raise_for_status()
