"""Waiting for a run to change: re-read a handle until a predicate holds or a timeout passes,
woken by change notifications, with polling as the fallback."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable

from tether.runtime.operations.env import Env
from tether.runtime.operations.queries import RunView, get
from tether.runtime.statuses import ENDED_STATUSES
from tether.storage.notify import CHANGE_CHANNEL
from tether.storage.rows import ExecutionRow

#: A predicate over the chain's live run; an async one may read other runs (a sub-run's state).
Predicate = Callable[[ExecutionRow], bool | Awaitable[bool]]


async def _holds(predicate: Predicate, row: ExecutionRow) -> bool:
    verdict = predicate(row)
    if inspect.isawaitable(verdict):
        return bool(await verdict)
    return bool(verdict)


async def wait_until(
    env: Env,
    execution_id: str,
    predicate: Predicate,
    *,
    timeout: float,
) -> RunView:
    """Re-read the handle until `predicate(current run)` holds or `timeout` passes; returns
    the last view either way. Woken by change notifications of any run (so a predicate that
    reads the run's children sees their changes too), with polling as fallback."""
    changed = asyncio.Event()
    unsubscribe = env.subscribe(CHANGE_CHANNEL, lambda _c, _p: changed.set())
    try:
        view = await get(env, execution_id)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while not await _holds(predicate, view.current):
                    changed.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(changed.wait(), env.poll_s())
                    view = await get(env, execution_id)
        return view
    finally:
        unsubscribe()


async def wait_for_end(env: Env, execution_id: str, *, timeout: float) -> RunView:
    """Wait until the chain's live run has ended (or timeout); returns the last view."""
    return await wait_until(
        env, execution_id, lambda r: r.status in ENDED_STATUSES, timeout=timeout
    )
