"""Runtime fixtures: run an App against the per-test database with fast worker settings."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tether.runtime.registry import App
from tether.runtime.service import Runtime, running
from tether.runtime.worker import WorkerSettings

FAST = WorkerSettings(concurrency=8, lease_s=5.0, poll_s=0.05, shutdown_grace_s=1.0)

Start = Callable[..., contextlib.AbstractAsyncContextManager[Runtime]]


@pytest.fixture
def start(db_url: str) -> Start:
    """`async with start(app) as rt:` — workers running on this test's database."""

    @contextlib.asynccontextmanager
    async def _start(app: App, **kwargs: Any) -> AsyncIterator[Runtime]:
        kwargs.setdefault("worker_settings", FAST)
        kwargs.setdefault("janitor_interval_s", None)
        async with running(db_url, app, run_migrations=False, **kwargs) as rt:
            yield rt

    return _start
