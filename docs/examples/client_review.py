"""Start a document review, show what it waits for, approve it, print the outcome.

Run it beside `tether serve` (the bundled example workflows):

    python docs/examples/client_review.py                       # http://127.0.0.1:8000/mcp
    TETHER_URL=postgresql://… python docs/examples/client_review.py   # the database instead
"""

from __future__ import annotations

import asyncio
import os

from pydantic import BaseModel

import tether.client

# The App that defines `document_review`: here the demo app `tether serve` runs by default;
# in your code, your own App. Only the database transport uses it (to start runs).
from tether.examples import app


class ReviewOutcome(BaseModel):
    """What `document_review` returns, as this program reads it."""

    title: str
    decision: str
    ticket: str | None = None
    rounds: int


async def main() -> None:
    url = os.environ.get("TETHER_URL", "http://127.0.0.1:8000/mcp")
    token = os.environ.get("TETHER_TOKEN")  # an API token, when the server requires one
    async with tether.client.connect(url, token=token, app=app) as client:
        run = await client.start(
            "document_review",
            {"title": "Q3 report", "body": "Revenue grew by 4%."},
            result_type=ReviewOutcome,  # result() validates the output into it
        )
        print(f"started {run.id} over {client.transport}")

        snapshot = await run.wait(timeout=60)  # until it needs an answer, or has ended
        for wait in snapshot.waits:
            print(f"waiting: {wait.kind} {wait.name!r}: {wait.message}")
        if snapshot.needs_input:
            await run.answer("publish", {"decision": "approve", "ticket": "CHG-42"})

        outcome = await run.result(timeout=60)
        print(f"outcome: {outcome.decision}, ticket {outcome.ticket}, {outcome.rounds} round(s)")


if __name__ == "__main__":
    asyncio.run(main())
