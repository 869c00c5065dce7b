"""`tether runs watch RUN_ID`: follow one run live until it ends.

Changes are pushed: a Listener LISTENs for the runtime's change notifications and
`Operations.wait_until` re-reads the run when one arrives (its own slow re-read is only the
fallback for a lost notification). On a terminal a spinner line shows the status and details
as they change; elsewhere each change is one line (`--json`: one JSON object per line).

Exit codes: 0 completed; 1 failed, timed out, cancelled or terminated; 3 with `--until-wait`
when the run waits for an answer. Without `--until-wait` an open wait is printed with the
command that answers it and watching goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from tether.cli import render
from tether.cli.output import Output
from tether.runtime.notifications import Listener
from tether.runtime.operations import Operations
from tether.runtime.rows import ExecutionRow
from tether.runtime.watching import watch_stop

WAITING_FOR_INPUT = 3
LISTEN_READY_S = 5.0  # how long to wait for LISTEN before relying on the fallback re-reads
RECHECK_S = 3600.0  # one wait_until round; the loop simply starts another


def exit_code(row: ExecutionRow) -> int:
    return 0 if row.status == "completed" else 1


class Display:
    """Prints a run's changes: a live spinner line on a terminal, lines elsewhere."""

    def __init__(self, out: Output, *, live: bool = True) -> None:
        self.out = out
        self.spinner = Spinner("dots", style="cyan")
        self.live: Live | None = None
        self.last_line = ""
        if out.fancy and live:
            self.live = Live(self.spinner, console=out.console, refresh_per_second=10)

    def __enter__(self) -> Display:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def headline(self, row: ExecutionRow, answered: list[dict[str, Any]] | None = None) -> Text:
        text = Text.assemble(
            (f"{row.workflow} ", "bold" if self.out.fancy else ""),
            row.id,
            "  ",
            render.status_text(row.status),
        )
        doing = render.activity(row, self.out.now(), self.out.fancy, answered=answered)
        if doing:
            text.append(f"  {doing}")
        return text

    def changed(self, row: ExecutionRow, answered: list[dict[str, Any]] | None = None) -> None:
        """Show a new version of the run (`answered`: the waits it was parked on, answered
        since, while its details are still those it parked with)."""
        if self.out.json:
            self.out.data(render.row_dict(row), line=True)
        elif self.live is not None:
            self.spinner.update(text=self.headline(row, answered))
        else:
            line = self.headline(row, answered)
            if line.plain != self.last_line:  # a new version can look the same
                self.out.show(line)
                self.last_line = line.plain

    def wait_opened(self, row: ExecutionRow, wait: dict[str, Any]) -> None:
        if self.out.json:
            return  # the row line already carries its waits
        block = render.wait_block(row, wait, self.out.now(), self.out.fancy)
        self.out.console.print(Group(Text("needs an answer: ", style="bold"), block))

    def ended(self, row: ExecutionRow) -> None:
        if self.out.json:
            return
        final = render.run_detail(row, self.out.now(), self.out.fancy)
        if self.live is not None:
            self.live.update(final)
        else:
            self.out.show(final)


async def watch(
    ops: Operations, listener: Listener, run_id: str, out: Output, *, until_wait: bool
) -> int:
    """Follow `run_id` until it ends (or, with `until_wait`, until it waits for an answer)."""
    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(listener.run())
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LISTEN_READY_S):
                    await listener.ready.wait()
            return await follow(ops, run_id, out, until_wait=until_wait)
        finally:
            listener.stop()


def _parked(
    row: ExecutionRow, before: tuple[list[dict[str, Any]], str | None] | None
) -> tuple[list[dict[str, Any]], str | None] | None:
    """The waits the run is parked on (or was, until they were answered) and its details then;
    None once the run has moved past them (other details, another run of the chain, its end):
    until then its details are the line it parked with, not what it does now."""
    waits = render.open_waits(row) if row.live else []
    if waits:
        return waits, row.details
    if before is not None and row.live and row.details == before[1]:
        return before
    return None


def _changed_since(seen: tuple[str, int] | None) -> Callable[[ExecutionRow], bool]:
    return lambda row: (row.id, row.version) != seen


async def follow(
    ops: Operations, run_id: str, out: Output, *, until_wait: bool, live: bool = True
) -> int:
    """The watch loop over an Operations that has a listener (`live`: a spinner line on a
    terminal; off, each change is printed, e.g. to record it)."""
    view = await ops.get(run_id)
    announced: set[str] = set()
    shown: tuple[str, int] | None = None
    parked: tuple[list[dict[str, Any]], str | None] | None = None  # waits, details then
    with Display(out, live=live) as display:
        while True:
            row = view.current
            parked = _parked(row, parked)
            if (row.id, row.version) != shown:
                display.changed(row, parked[0] if parked and row.status != "waiting" else None)
                shown = (row.id, row.version)
            stop = watch_stop(row)  # the same decision as the <wf>_watch tool's
            if stop == "ended":
                display.ended(row)
                return exit_code(row)
            waits = render.open_waits(row) if row.live else []
            for wait in waits:
                if wait.get("key") not in announced:
                    announced.add(str(wait.get("key")))
                    display.wait_opened(row, wait)
            if until_wait and stop == "needs_answer":
                return WAITING_FOR_INPUT
            view = await ops.wait_until(run_id, _changed_since(shown), timeout=RECHECK_S)
