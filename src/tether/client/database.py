"""The database transport: the runtime's operations (the one API every surface calls) on a
pool of the client's own, with no worker. Whichever worker or server shares the database runs
what this starts and answers; changes arrive through a LISTEN connection of the client's own
(`Operations.wait_until`), with the runtime's polling as the fallback.

Settings that decide how runs are stored come from the environment as for `tether serve`
(TETHER_ENCRYPTION_KEYS to seal and open payloads, TETHER_QUEUES and TETHER_PROFILES for
admission), so a run started here is stored as the servers would store it.

Every operation runs under `_runtime_errors()`: the one table of `runtime_errors.py` turns the
runtime's errors into the client's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from typing import Any, Final

from tether.client import errors
from tether.client.runtime_errors import FROM_RUNTIME, RuntimeErrors
from tether.client.snapshots import Answered, RunSnapshot, from_task
from tether.client.transport import Kind
from tether.runtime.notifications import Listener
from tether.runtime.operations import Operations, RunView
from tether.runtime.registry import App
from tether.runtime.rows import ExecutionRow
from tether.runtime.service import operations, routed
from tether.settings import Settings
from tether.tasks import views

#: Who the runs' history names as the author of what this client does.
BY: Final = "client"
#: How long opening waits for LISTEN before relying on the fallback re-reads.
LISTEN_READY_S: Final = 5.0
#: One `wait_until` round while following a run; the loop starts another.
RECHECK_S: Final = 3600.0

_MAPPED: Final = RuntimeErrors(FROM_RUNTIME)


def _runtime_errors() -> RuntimeErrors:
    return _MAPPED


class DatabaseTransport:
    """Runs by id through `Operations`; open with `open_database`."""

    kind: Kind = "database"

    def __init__(
        self,
        ops: Operations,
        stack: contextlib.AsyncExitStack,
        *,
        poll_interval_ms: int,
        has_app: bool,
    ) -> None:
        self._ops = ops
        self._stack = stack
        self._poll_interval_ms = poll_interval_ms
        self._has_app = has_app

    async def start(self, workflow: str, input: Any, *, idempotency_key: str | None) -> str:
        try:
            with _runtime_errors():
                started = await self._ops.start(
                    workflow, input, idempotency_key=idempotency_key, by=BY
                )
        except errors.WorkflowNotFound as exc:
            if self._has_app:
                raise
            raise errors.WorkflowNotFound(
                f"{exc.message}: starting a run over the database needs the App that defines "
                "the workflow (connect(..., app=app))"
            ) from exc
        return started.execution.id

    async def get(self, run_id: str) -> RunSnapshot:
        with _runtime_errors():
            view = await self._ops.get(run_id)
        return self._snapshot(view)

    async def answer(self, run_id: str, wait: str, values: Any) -> Answered:
        with _runtime_errors():
            result = await self._ops.answer_wait(run_id, wait, values, by=BY)
        return Answered(result.key, duplicate=result.status == "duplicate")

    async def cancel(self, run_id: str) -> None:
        with _runtime_errors():
            await self._ops.cancel(run_id, by=BY)

    async def changes(self, run_id: str) -> AsyncGenerator[RunSnapshot, None]:
        with _runtime_errors():
            view = await self._ops.get(run_id)
        last: RunSnapshot | None = None
        while True:
            snapshot = self._snapshot(view)
            if snapshot != last:
                last = snapshot
                yield snapshot
            if snapshot.ended:
                return
            with _runtime_errors():
                view = await self._ops.wait_until(
                    run_id, _changed_since(view.current), timeout=RECHECK_S
                )

    async def aclose(self) -> None:
        await self._stack.aclose()

    def _snapshot(self, view: RunView) -> RunSnapshot:
        """The task view `tasks/get` would show for this run (to a client that declared form
        elicitation), with the output exactly as stored."""
        task = views.task(
            view.requested,
            view.current,
            view.chain,
            elicitation=True,
            poll_interval_ms=self._poll_interval_ms,
        )
        shown = view.requested if view.requested.sealed_from else view.current
        if task["status"] == "completed" and not task["result"].get("isError"):
            return from_task(task, output=shown.output)
        return from_task(task)


def _changed_since(row: ExecutionRow) -> Callable[[ExecutionRow], bool]:
    seen = (row.id, row.version)
    return lambda current: (current.id, current.version) != seen


async def open_database(
    dsn: str, app: App | None, *, pool_size: int, settings: Settings
) -> DatabaseTransport:
    """Open the pool and the LISTEN connection on `dsn` (as the settings route it when it is
    their TETHER_DATABASE_URL: pooler, LISTEN URL). Raises TransportError when the database
    cannot be reached; ValueError for a bad TETHER_ENCRYPTION_KEYS."""
    stack = contextlib.AsyncExitStack()
    try:
        if dsn == settings.database_url:
            stack.enter_context(
                routed(
                    dsn,
                    statement_cache_size=settings.statement_cache(),
                    listen_dsn=settings.listen_database_url,
                )
            )
        listener = Listener(dsn)
        with _runtime_errors():
            ops = await stack.enter_async_context(
                operations(
                    dsn,
                    app if app is not None else App("tether.client"),
                    pool_size=pool_size,
                    listener=listener,
                    admission=settings.admission(),
                    encryption=settings.encryption(),
                )
            )
        listening = asyncio.create_task(listener.run(), name="tether.client listener")

        async def stop_listening() -> None:
            listener.stop()
            await listening

        stack.push_async_callback(stop_listening)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LISTEN_READY_S):
                await listener.ready.wait()
    except BaseException:
        await stack.aclose()
        raise
    return DatabaseTransport(
        ops, stack, poll_interval_ms=settings.poll_interval_ms, has_app=app is not None
    )
