"""An A2A agent built with the A2A SDK (`a2a-sdk`, its JSON-RPC server and request handler),
for the A2A remote tests: its own agent executor reads the first word of the user's message:

- `echo TEXT`: completes with a text artifact (`echo: TEXT`), a data artifact and a message;
- `fail WHY` / `reject WHY`: the task ends `failed` / `rejected`, saying why;
- `ask QUESTION`: the task is `input-required` with the question; the reply completes it
  with a text artifact `hello REPLY`; a reply `again` asks a second question first;
- `hold TEXT`: the task works until `POST /release/{task}` (then completes with `released:
  TEXT`), or until cancelled;
- `reply TEXT`: the agent answers with a message, no task.

It answers a repeated `SendMessage` (the same `messageId`) with the task that message made,
without running anything again (`Deduping`). With a directory (`python a2a_agent.py PORT DIR`)
its tasks and the messages it has seen are kept in files there, so a restarted agent still
knows them (a `hold` cut by the restart stays `working`); without, they live in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from a2a.helpers.proto_helpers import get_message_text, new_data_part, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

#: The holds in progress, by task id: set to release one.
_HOLDS: dict[str, asyncio.Event] = {}


def card(url: str) -> AgentCard:
    return AgentCard(
        name="test-agent",
        description="An agent for Tether's A2A remote tests",
        version="1",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC")],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id="test", name="test", description="echo, ask, hold", tags=["t"])],
    )


class Executor(AgentExecutor):
    """The agent's work (module docstring)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task_id, context_id = str(context.task_id), str(context.context_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        text = get_message_text(message)
        current = context.current_task
        word, _, rest = text.partition(" ")
        if current is None and word != "reply":
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=[message])
            )
        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await self._answered(updater, text, current)
            return
        if word == "reply":
            await event_queue.enqueue_event(
                Message(
                    role=Role.ROLE_AGENT,
                    message_id=f"reply-{message.message_id}",
                    context_id=context_id,
                    parts=[new_text_part(f"you said {rest}")],
                )
            )
            return
        await updater.start_work()
        if word == "echo":
            await updater.add_artifact([new_text_part(f"echo: {rest}")], name="echo")
            data = message.parts[1].data if len(message.parts) > 1 else None
            payload = json_format.MessageToDict(data) if data is not None else {"n": len(rest)}
            await updater.add_artifact([new_data_part(payload)], name="data")
            await updater.complete(updater.new_agent_message([new_text_part("done")]))
        elif word == "fail":
            await updater.failed(updater.new_agent_message([new_text_part(rest)]))
        elif word == "reject":
            await updater.reject(updater.new_agent_message([new_text_part(rest)]))
        elif word == "ask":
            await updater.requires_input(updater.new_agent_message([new_text_part(rest)]))
        elif word == "hold":
            release = _HOLDS.setdefault(task_id, asyncio.Event())
            await release.wait()
            await updater.add_artifact([new_text_part(f"released: {rest}")], name="hold")
            await updater.complete()
        else:
            await updater.failed(updater.new_agent_message([new_text_part(f"unknown: {word}")]))

    async def _answered(self, updater: TaskUpdater, reply: str, task: Task) -> None:
        await updater.start_work()
        if reply == "again":
            ask = updater.new_agent_message([new_text_part("And your surname?")])
            await updater.requires_input(ask)
            return
        asked = len([m for m in task.history if m.role == Role.ROLE_AGENT])
        await updater.add_artifact([new_text_part(f"hello {reply}")], name="greeting")
        await updater.complete(updater.new_agent_message([new_text_part(f"asked {asked}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        await updater.cancel()


class FileTaskStore(TaskStore):
    """Tasks kept as JSON files in a directory: they outlive the process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, task_id: str) -> Path:
        return self.root / f"task-{task_id}.json"

    async def save(self, task: Task, context: ServerCallContext) -> None:
        path = self._path(task.id)
        temp = path.with_suffix(".tmp")
        temp.write_text(json_format.MessageToJson(task), encoding="utf-8")
        os.replace(temp, path)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        path = self._path(task_id)
        if not path.exists():
            return None
        return json_format.Parse(path.read_text(encoding="utf-8"), Task())

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        tasks = [
            json_format.Parse(p.read_text(encoding="utf-8"), Task())
            for p in sorted(self.root.glob("task-*.json"))
        ]
        found = [t for t in tasks if not params.context_id or t.context_id == params.context_id]
        return ListTasksResponse(tasks=found, page_size=len(found), total_size=len(found))

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        self._path(task_id).unlink(missing_ok=True)


class Deduping(DefaultRequestHandler):
    """Answers a message it has seen (by `messageId`) with the task that message made or
    continued, instead of running it again. Kept in `seen.json` when the store is a directory."""

    def __init__(self, *args: Any, root: Path | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.file = root / "seen.json" if root is not None else None
        self.seen: dict[str, str] = {}
        if self.file is not None and self.file.exists():
            self.seen = json.loads(self.file.read_text(encoding="utf-8"))

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        known = self.seen.get(params.message.message_id)
        if known is not None:
            request = GetTaskRequest(id=known, history_length=0)
            found: Task | None = await self.on_get_task(request, context)
            assert found is not None
            return found
        result: Message | Task = await super().on_message_send(params, context)
        if isinstance(result, Task):
            self.seen[params.message.message_id] = result.id
            if self.file is not None:
                self.file.write_text(json.dumps(self.seen), encoding="utf-8")
        return result


async def release(request: Request) -> JSONResponse:
    """`POST /release/{task}`: the hold of that task completes."""
    task = request.path_params["task"]
    event = _HOLDS.get(task)
    if event is None:
        return JSONResponse({"released": False}, status_code=404)
    event.set()
    return JSONResponse({"released": True})


def asgi(port: int, root: Path | None = None) -> Starlette:
    url = f"http://127.0.0.1:{port}/"
    store: TaskStore = FileTaskStore(root) if root is not None else InMemoryTaskStore()
    handler = Deduping(Executor(), store, card(url), root=root)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()  # the tasks still running are stopped

    routes = [
        *create_agent_card_routes(card(url)),
        *create_jsonrpc_routes(handler, rpc_url="/"),
        Route("/release/{task}", release, methods=["POST"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


if __name__ == "__main__":  # `python tests/apps/a2a_agent.py PORT [DIR]`: one agent process
    import uvicorn

    where = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    uvicorn.run(asgi(int(sys.argv[1]), where), host="127.0.0.1", port=int(sys.argv[1]))
