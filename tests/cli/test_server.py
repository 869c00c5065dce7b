"""`tether serve`'s stop at once (cli/server.py), in-process. Our choice."""

from __future__ import annotations

import asyncio
import multiprocessing

from tether.cli import server
from tether.specs.dag import load_string
from tether.tools import offload

DAG = "steps:\n  - name: a\n    command: 'true'\n"


async def test_stopping_at_once_ends_the_document_worker_then_lets_the_database_go() -> None:
    """The document worker is a child process: the process's exit at once (a second Ctrl-C)
    skips the server's shutdown and would leave it running, so the stop ends it first."""
    await offload.run(load_string, DAG, default_name="x")
    children = multiprocessing.active_children()
    assert children  # the worker that read the spec
    calls: list[str] = []

    def stop_database() -> None:
        calls.append("database")

    await asyncio.to_thread(server.stop_now(stop_database))
    assert calls == ["database"]
    assert not any(child.is_alive() for child in children)
