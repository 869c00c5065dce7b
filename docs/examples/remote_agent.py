"""Ask an A2A agent, durably, and relay its question to a person.

Two parts live here: an A2A agent (`agent_app`, built with the A2A SDK: `pip install
'a2a-sdk[http-server]'`) that translates a greeting after asking which register to use, and
the Tether app (`app`) whose workflow `greet_customer` asks it with `ctx.ask_agent`. The
agent's question shows on the Tether run as its own; the answer given to Tether is sent to
the agent as a reply message.

Run the agent and Tether (two terminals; Tether needs the `a2a` extra):

    python docs/examples/remote_agent.py agent        # the agent on 127.0.0.1:8103
    tether serve docs/examples/remote_agent.py:app

then drive a run from this program (it starts one, answers the question, prints the outcome):

    python docs/examples/remote_agent.py              # TETHER_URL: Tether's MCP URL
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from a2a.helpers.proto_helpers import get_message_text, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from pydantic import BaseModel
from starlette.applications import Starlette

import tether
import tether.client

# --- the agent: any A2A agent would do; this one is built with the A2A SDK ------------------

GREETINGS = {"formal": "Bonjour, {name}.", "informal": "Salut {name} !"}


class Translator(AgentExecutor):
    """Greets a customer in French, once told which register to use."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.message is None:
            raise ValueError("a request without a message")
        task_id, context_id = str(context.task_id), str(context.context_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        task = context.current_task
        if task is None:  # a new request: ask which register to use
            first = new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED)
            first.history.append(context.message)
            await event_queue.enqueue_event(first)
            question = "Formal or informal?"
            await updater.requires_input(updater.new_agent_message([new_text_part(question)]))
            return
        name = get_message_text(task.history[0]).removeprefix("Greet ")
        register = get_message_text(context.message).strip().lower()
        greeting = GREETINGS.get(register, GREETINGS["formal"]).format(name=name)
        await updater.add_artifact([new_text_part(greeting)], name="greeting")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()


def agent_app(url: str) -> Starlette:
    """The agent's HTTP app: its card at the well-known path, A2A's JSON-RPC at `/`."""
    card = AgentCard(
        name="translator",
        description="Greets customers in French",
        version="1",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="greet", name="greet", description="A greeting", tags=["fr"])],
    )
    handler = DefaultRequestHandler(Translator(), InMemoryTaskStore(), card)
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
    return Starlette(routes=routes)


# --- the Tether app ---------------------------------------------------------------------------

app = tether.App("greeter")
# Where the agent is. TETHER_REMOTES may point it elsewhere (a setting replaces this).
app.remote("translator", url="http://127.0.0.1:8103/", protocol="a2a")


class Customer(BaseModel):
    name: str


@app.workflow(expose=tether.Exposure(tool_set=True))
async def greet_customer(ctx: tether.Context, customer: Customer) -> dict[str, Any]:
    """Have the translator greet a customer; the translator's question goes to a person."""
    reply = await ctx.ask_agent("translator", f"Greet {customer.name}", timeout=24 * 3600)
    return {"greeting": reply["text"]}


# --- driving a run ----------------------------------------------------------------------------


async def main() -> None:
    url = os.environ.get("TETHER_URL", "http://127.0.0.1:8000/mcp")
    token = os.environ.get("TETHER_TOKEN")  # an API token, when the server requires one
    async with tether.client.connect(url, token=token, app=app) as client:
        run = await client.start("greet_customer", {"name": "Ada"})
        print(f"started {run.id}")
        snapshot = await run.wait(timeout=60)  # until it needs an answer, or has ended
        for wait in snapshot.waits:  # the agent's question, as our own
            print(f"waiting: {wait.kind}: {wait.message}")
            await run.answer(wait.key, {"reply": "informal"})
        outcome = await run.result(timeout=60)
        print(f"outcome: {outcome['greeting']}")


if __name__ == "__main__":
    if sys.argv[1:] == ["agent"]:
        import uvicorn

        uvicorn.run(agent_app("http://127.0.0.1:8103/"), host="127.0.0.1", port=8103)
    else:
        asyncio.run(main())
