"""A minimal A2A agent for bench/remote.py, built with the A2A SDK's server, in a process of
its own: every message starts a task that completes at once with one text artifact.

    python bench/remote_agent.py PORT
"""

from __future__ import annotations

import sys

import uvicorn
from a2a.helpers.proto_helpers import get_message_text, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from starlette.applications import Starlette


class Echo(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task_id, context_id = str(context.task_id), str(context.context_id)
        await event_queue.enqueue_event(
            new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED)
        )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.add_artifact([new_text_part(get_message_text(context.message))])
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()


def asgi(port: int) -> Starlette:
    url = f"http://127.0.0.1:{port}/"
    card = AgentCard(
        name="bench-echo",
        description="Completes every task at once",
        version="1",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["bench"])],
    )
    handler = DefaultRequestHandler(Echo(), InMemoryTaskStore(), card)
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
    return Starlette(routes=routes)


if __name__ == "__main__":
    port = int(sys.argv[1])
    uvicorn.run(asgi(port), host="127.0.0.1", port=port, log_level="warning")
