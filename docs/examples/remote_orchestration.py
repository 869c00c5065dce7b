"""Orchestrate two remote MCP servers and one person's answer, durably.

Three apps live here: two remotes (`research` and `finance`, each a Tether server of its own)
and the orchestrator (`app`), whose workflow `plan_offsite` calls a tool of each. The finance
remote asks a person to approve the budget; the orchestrator's run shows that question as its
own, and the answer given to the orchestrator is forwarded to the finance remote.

Run the remotes and the orchestrator (three terminals; each server its own data directory):

    tether serve docs/examples/remote_orchestration.py:research --port 8101 --data-dir .research
    tether serve docs/examples/remote_orchestration.py:finance --port 8102 --data-dir .finance
    tether serve docs/examples/remote_orchestration.py:app

then drive a run from this program (it starts one, answers the question, prints the outcome):

    python docs/examples/remote_orchestration.py        # TETHER_URL: the orchestrator's MCP URL
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import BaseModel

import tether
import tether.client

# --- the remotes: each serves its workflows as MCP tools that run as tasks -------------------

research = tether.App("research")


class Topic(BaseModel):
    topic: str


@research.workflow(expose=tether.Exposure(tool=True))
async def summarize(ctx: tether.Context, args: Topic) -> dict[str, Any]:
    """Summarize what is known about a topic (here: at once)."""
    return {"summary": f"{args.topic}: three venues fit, the lake house is cheapest"}


finance = tether.App("finance")


class Budget(BaseModel):
    amount: int
    reason: str


@finance.workflow(expose=tether.Exposure(tool=True))
async def approve_budget(ctx: tether.Context, args: Budget) -> dict[str, Any]:
    """Ask a person to approve a budget; returns who decided."""
    answer = await ctx.approval(
        "budget", prompt=f"Approve {args.amount} EUR for {args.reason}?", inputs=["ticket"]
    )
    if isinstance(answer, tether.PushedBack):
        return {"approved": False, "by": answer.by}
    return {"approved": True, "ticket": answer.inputs.get("ticket"), "by": answer.by}


# --- the orchestrator -------------------------------------------------------------------------

app = tether.App("orchestrator")
# Where the remotes are. TETHER_REMOTES may point them elsewhere (a setting replaces these).
app.remote("research", url=os.environ.get("RESEARCH_URL", "http://127.0.0.1:8101/mcp"))
app.remote("finance", url=os.environ.get("FINANCE_URL", "http://127.0.0.1:8102/mcp"))


class Offsite(BaseModel):
    topic: str
    amount: int


@app.workflow(expose=tether.Exposure(tool_set=True))
async def plan_offsite(ctx: tether.Context, offsite: Offsite) -> dict[str, Any]:
    """Research the offsite, then have finance approve its budget."""
    found = await ctx.call_tool("research", "summarize", {"topic": offsite.topic})
    try:
        decision = await ctx.call_tool(
            "finance",
            "approve_budget",
            {"amount": offsite.amount, "reason": offsite.topic},
            timeout=7 * 24 * 3600,  # a week for the person to answer
        )
    except tether.RemoteToolError as exc:  # the approval was rejected: the remote tool failed
        return {"summary": found["summary"], "approved": False, "why": str(exc)}
    return {"summary": found["summary"], **decision}


# --- driving a run ----------------------------------------------------------------------------


async def main() -> None:
    url = os.environ.get("TETHER_URL", "http://127.0.0.1:8000/mcp")
    token = os.environ.get("TETHER_TOKEN")  # an API token, when the server requires one
    async with tether.client.connect(url, token=token, app=app) as client:
        run = await client.start("plan_offsite", {"topic": "team offsite", "amount": 4000})
        print(f"started {run.id}")
        snapshot = await run.wait(timeout=60)  # until it needs an answer, or has ended
        for wait in snapshot.waits:  # the finance remote's question, as our own
            print(f"waiting: {wait.kind}: {wait.message}")
            await run.answer(wait.key, {"decision": "approve", "ticket": "FIN-7"})
        outcome = await run.result(timeout=60)
        print(f"outcome: {outcome['summary']}; approved={outcome['approved']}")


if __name__ == "__main__":
    asyncio.run(main())
