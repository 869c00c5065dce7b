"""`tether runs watch`'s lines (cli/watch.py) over a real run, in-process: after an answer the
watch says the run resumes, never the details line it set before it parked. Our choice."""

from __future__ import annotations

import asyncio
import io

import pytest

from tether.cli.output import Output
from tether.cli.watch import follow
from tether.examples import app as examples

from .conftest import Start

pytestmark = pytest.mark.postgres

TIMEOUT = 20.0


class Screen(io.StringIO):
    """What the watch prints; `asked` is set once it has printed the open wait."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        if "needs an answer" in self.getvalue():
            self.asked.set()
        return written


async def test_after_an_answer_the_watch_shows_no_line_from_before_the_wait(
    start: Start,
) -> None:
    """document_review sets "round 1: waiting for approval of …" before it parks; once the
    approval is answered, no line of the watch shows that text, and the last says how it
    ended."""
    async with start(examples) as rt:
        run = (await rt.ops.start("document_review", {"title": "T", "body": "a b"})).execution.id
        out = Screen()
        watching = asyncio.create_task(
            follow(rt.ops, run, Output(False, file=out), until_wait=False, live=False)
        )
        parked = await rt.ops.wait_until(run, lambda r: bool(r.waits), timeout=TIMEOUT)
        async with asyncio.timeout(TIMEOUT):
            await out.asked.wait()
        (wait,) = parked.current.waits
        await rt.ops.answer(run, wait["key"], {"decision": "approve", "ticket": "T-1"})
        async with asyncio.timeout(TIMEOUT):
            assert await watching == 0
    lines = out.getvalue().splitlines()
    after = lines[lines.index(next(x for x in lines if x.startswith("  answer: "))) + 1 :]
    headlines = [x for x in after if x.startswith(f"document_review {run}")]
    assert "  completed  done in " in headlines[-1]
    assert not any("waiting for approval of" in x for x in headlines), after
    assert all(x.endswith("answered approval 'publish'; resuming") for x in headlines[:-1]), (
        headlines
    )
