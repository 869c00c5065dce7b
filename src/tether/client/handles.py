"""`RunHandle`: one run, by id, over whichever transport the client connected with."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, Generic, Literal, TypeVar, cast

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from tether.client import errors
from tether.client.snapshots import Answered, RunError, RunSnapshot
from tether.client.transport import Transport

T = TypeVar("T")


def jsonable(value: Any, what: str) -> Any:
    """`value` as JSON data (pydantic models, dataclasses, dates… as JSON would hold them).
    Raises TypeError naming `what` when it cannot be."""
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError as exc:
        raise TypeError(f"{what} is not JSON-serialisable: {exc}") from exc


@contextlib.asynccontextmanager
async def within(timeout: float | None, what: str) -> AsyncIterator[None]:
    """Bound the block by `timeout` seconds (None: no bound). Raises WaitTimedOut when the
    bound cut it short."""
    if timeout is None:
        yield
        return
    try:
        async with asyncio.timeout(timeout) as bound:
            yield
    except TimeoutError as exc:
        if bound.expired():
            raise errors.WaitTimedOut(f"{what} within {timeout:g}s") from exc
        raise


class RunHandle(Generic[T]):
    """A run, by id. Cheap to make and to keep: it holds no state but the id, so any number of
    tasks may share one, and a handle made from a stored id works like the one `start` gave.

    A handle follows its run's chain: after a retry or a continue-as-new it reads the live
    run, under the same id. Handles come from `Client.start` and `Client.get_handle`.

    Args:
        transport: the client's connection to runs.
        run_id: the run's id.
        result_type: what `result()` validates the output into (None: the output as is).
    """

    def __init__(self, transport: Transport, run_id: str, result_type: Any = None) -> None:
        self._transport = transport
        self._id = run_id
        self._result_type = result_type
        self._adapter: TypeAdapter[Any] | None = None

    @property
    def id(self) -> str:
        """The run's id: store it to find the run again (`Client.get_handle`)."""
        return self._id

    def __repr__(self) -> str:
        return f"RunHandle({self._id!r}, {self._transport.kind})"

    async def status(self) -> RunSnapshot:
        """Read the run now.

        Returns:
            The run as it is now.

        Raises:
            RunNotFound: no run has this id (or it is not visible to these credentials).
            NotAuthorized: (HTTP) the token may not read tasks.
            TransportError: the database or server cannot be reached.
        """
        return await self._transport.get(self._id)

    async def wait(
        self, *, until: Literal["settled", "ended"] = "settled", timeout: float | None = None
    ) -> RunSnapshot:
        """Wait until the run needs an answer or has ended (`until="settled"`, the default),
        or only until it has ended (`until="ended"`); the snapshot that got there. A run
        already there returns at once.

        Args:
            until: `"settled"` stops at an open wait too; `"ended"` only at the end.
            timeout: seconds to wait at most (None: as long as it takes).

        Returns:
            The first snapshot that is there.

        Raises:
            ValueError: `until` is neither of the two.
            WaitTimedOut: `timeout` passed first.
            RunNotFound: as for `status`.
            NotAuthorized: as for `status`.
            TransportError: as for `status`, or the run's changes stopped before its end.
        """
        if until not in ("settled", "ended"):
            raise ValueError(f"until must be 'settled' or 'ended', not {until!r}")
        async with (
            within(timeout, f"run {self._id} did not settle"),
            contextlib.aclosing(self._transport.changes(self._id)) as changes,
        ):
            async for snapshot in changes:
                if snapshot.ended or (until == "settled" and snapshot.needs_input):
                    return snapshot
        raise errors.TransportError(f"following run {self._id} stopped before it ended")

    async def result(self, *, timeout: float | None = None) -> T:
        """Wait for the run to end; its output (validated into the handle's `result_type`
        when one was given).

        Args:
            timeout: seconds to wait at most (None: as long as it takes).

        Returns:
            The run's output, as `result_type` when the handle has one.

        Raises:
            RunFailed: the run ended with an error (`.error` says which).
            RunCancelled: the run was cancelled or terminated.
            UnexpectedResult: the output does not fit `result_type`.
            WaitTimedOut: `timeout` passed first.
            RunNotFound: as for `status`.
            NotAuthorized: as for `status`.
            TransportError: as for `status`.
        """
        snapshot = await self.wait(until="ended", timeout=timeout)
        if snapshot.status == "completed":
            return self._decode(snapshot.output)
        if snapshot.status == "cancelled":
            raise errors.RunCancelled(snapshot.message or f"run {self._id} was cancelled")
        raise errors.RunFailed(snapshot.error or RunError("error", snapshot.message or ""))

    async def answer(self, wait: str, values: Any) -> Answered:
        """Answer one of the run's open waits. The first answer wins; the run is unchanged
        when the answer is refused.

        Args:
            wait: the wait's name (it keeps working when the run parks again and the key
                changes) or its key (when two open waits share the name).
            values: the answer: an approval's `{"decision": "approve", <inputs>}` (or
                `"reject"` with a `reason`, `"push_back"` with a `comment`), a human task's
                form fields, a signal's payload, an agent step's object; JSON-like data or a
                pydantic model.

        Returns:
            The key of the wait answered, and whether the answer repeated one given before.

        Raises:
            AnswerRefused: the answer does not fit the wait (`.violations`), no open wait (or
                several) has that key or name (`.open_waits` lists the open ones), or the wait
                was already answered differently.
            TypeError: `values` is not JSON-serialisable.
            RunNotFound: as for `status`.
            NotAuthorized: as for `status`.
            TransportError: as for `status`.
        """
        return await self._transport.answer(self._id, wait, jsonable(values, "the answer"))

    async def cancel(self) -> None:
        """Ask the run to cancel. Cooperative: it ends `cancelled` at its next durable step
        (a run still in its queue ends at once); an ended run is left as it is.

        Raises:
            RunNotFound: as for `status`.
            NotAuthorized: as for `status`.
            TransportError: as for `status`.
        """
        await self._transport.cancel(self._id)

    async def watch(self) -> AsyncGenerator[RunSnapshot, None]:
        """Follow the run: `async for snapshot in handle.watch(): …`. Changes are pushed
        (database LISTEN, or the server's `subscriptions/listen` stream), with polling as the
        fallback.

        Returns:
            An async iterator of snapshots: the run as it is now, then each change a caller
            would see (status, message, waits, output, error), ending after the ended one.

        Raises:
            RunNotFound: while iterating, as for `status`.
            NotAuthorized: while iterating, as for `status`.
            TransportError: while iterating, as for `status`.
        """
        async with contextlib.aclosing(self._transport.changes(self._id)) as changes:
            async for snapshot in changes:
                yield snapshot

    def _decode(self, output: Any) -> T:
        if self._result_type is None:
            return cast(T, output)
        if self._adapter is None:
            self._adapter = TypeAdapter(self._result_type)
        try:
            return cast(T, self._adapter.validate_python(output))
        except ValidationError as exc:
            raise errors.UnexpectedResult(
                f"the output of run {self._id} does not fit {self._result_type!r}: "
                f"{exc.error_count()} problem(s)",
            ) from exc
