"""Record `tether runs list`, `tether runs watch` and `tether runs show --history` as a terminal
shows them, for docs/cli.md.

    .venv/bin/python scripts/cli_screenshots.py

Real runs of the bundled examples on a real PostgreSQL (TETHER_DATABASE_URL, else an embedded
one in a temporary directory) with a worker in this process; the CLI's own renderers print
them to a recording rich console, saved as SVG and text under docs/cli-screens/.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

from tether.cli import render
from tether.cli.output import Output
from tether.cli.watch import follow
from tether.database_url import database_url
from tether.examples import app
from tether.runtime.service import running
from tether.runtime.worker import WorkerSettings
from tether.settings import Settings

OUT = Path(__file__).resolve().parents[1] / "docs" / "cli-screens"
FAST = WorkerSettings(concurrency=4, lease_s=5.0, poll_s=0.05, shutdown_grace_s=1.0)


@contextlib.contextmanager
def database() -> Iterator[str]:
    """TETHER_DATABASE_URL's database, else an embedded server in a temporary directory."""
    with (
        tempfile.TemporaryDirectory(prefix="tether-shots-", dir="/tmp") as tmp,
        database_url(Settings.from_env(data_dir=Path(tmp))) as dsn,
    ):
        yield dsn


def recorder() -> tuple[Console, Output]:
    console = Console(record=True, force_terminal=True, width=112, file=io.StringIO())
    return console, Output(False, console=console)


def save(console: Console, name: str, title: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    text = console.export_text(clear=False)
    (OUT / f"{name}.txt").write_text(
        "".join(line.rstrip() + "\n" for line in text.splitlines()), "utf-8"
    )
    (OUT / f"{name}.svg").write_text(console.export_svg(title=title), "utf-8")


async def main() -> None:
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    with database() as dsn:
        async with running(dsn, app, worker_settings=FAST, janitor_interval_s=None) as rt:
            ops = rt.ops
            done = await ops.start("long_job", {"steps": 2, "pause_seconds": 0})
            await ops.wait_for_end(done.execution.id, timeout=30)
            await ops.start("long_job", {"steps": 3, "pause_seconds": 600})
            review = await ops.start("document_review", {"title": "Q3 plan", "body": "Ship it."})
            rid = review.execution.id
            await ops.wait_until(rid, lambda r: bool(r.waits), timeout=30)
            await ops.wait_until(
                rid, lambda r: r.status == "waiting", timeout=30
            )  # the sleeping long_job too
            await asyncio.sleep(1)  # let the sleeping job park (a screenshot, not a test)
            console, out = recorder()
            page = await ops.list_runs(limit=10)
            out.show(render.runs_table(page.items, out.now(), fancy=True))
            save(console, "runs-list", "tether runs list")

            console, out = recorder()
            watch = asyncio.create_task(follow(ops, rid, out, until_wait=False, live=False))
            parked = await ops.wait_until(rid, lambda r: bool(r.waits), timeout=30)
            key = parked.current.waits[0]["key"]
            await asyncio.sleep(0.5)  # let the watch print the wait first (recording only)
            await ops.answer(rid, key, {"decision": "approve", "ticket": "CHG-42"}, by="cli")
            await asyncio.wait_for(watch, 30)
            save(console, "runs-watch", f"tether runs watch {rid}")

            failing = await ops.start("failing_job", {})
            fid = failing.execution.id
            await ops.wait_for_end(fid, timeout=30)
            console, out = recorder()
            for run_id in (rid, fid):
                row = (await ops.get(run_id)).current
                history = (await ops.history(run_id), await ops.steps(run_id))
                out.show(render.show(row, out.now(), fancy=True, history=history))
            save(console, "runs-show-history", "tether runs show --history")


if __name__ == "__main__":
    asyncio.run(main())
