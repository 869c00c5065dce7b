"""Admission fixtures: runtimes (pool, listener, workers) over the per-test database with an
admission configuration, and a bounded wait on a database condition."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest

from tether.runtime.admission import Admission
from tether.runtime.registry import App
from tether.runtime.service import Runtime, running
from tether.runtime.worker import WorkerSettings
from tether.storage.notify import CHANGE_CHANNEL, READY_CHANNEL

CHANNELS = (CHANGE_CHANNEL, READY_CHANNEL)

FAST = WorkerSettings(concurrency=8, lease_s=5.0, poll_s=0.05, shutdown_grace_s=1.0)

Start = Callable[..., contextlib.AbstractAsyncContextManager[Runtime]]


@pytest.fixture
def start(db_url: str) -> Start:
    """`async with start(app, Admission(...), workers=2) as rt:` — one process's runtime."""

    @contextlib.asynccontextmanager
    async def _start(app: App, admission: Admission, **kwargs: Any) -> AsyncIterator[Runtime]:
        kwargs.setdefault("janitor_interval_s", None)
        settings = replace(FAST, admission=admission)
        async with running(
            db_url, app, worker_settings=settings, run_migrations=False, **kwargs
        ) as rt:
            yield rt

    return _start


async def eventually(
    rt: Runtime, check: Callable[[], Awaitable[bool]], timeout: float = 10.0
) -> None:
    """Re-check a database condition after each run change or wake-up notification until it
    holds; fail after `timeout` seconds."""
    changed = asyncio.Event()
    offs = [rt.listener.subscribe(ch, lambda _c, _p: changed.set()) for ch in CHANNELS]
    try:
        async with asyncio.timeout(timeout):
            await rt.listener.ready.wait()
            while True:
                changed.clear()
                if await check():
                    return
                await changed.wait()
    finally:
        for off in offs:
            off()
