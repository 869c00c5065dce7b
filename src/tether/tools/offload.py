"""Work on caller-supplied documents, out of the serving process: parsing and validating an
inline DAG spec or a `create_workflow` plan costs CPU in proportion to the document (55 to 80
ms for the largest the default limits accept), and inside the serving process that time is
taken from the event loop, whether the loop runs it or a thread does while it holds the
interpreter lock.

One worker process reads the documents, in turn:

* started on first use, by `spawn` (the serving process has threads and an event loop, which
  a `fork` would copy in whatever state they were in), and stopped with the last server
  using it (`in_use`) or by `shutdown`;
* at a lower CPU priority (`NICENESS`), so that on a busy machine the OS scheduler serves the
  event loop and PostgreSQL first and the documents with the time left over;
* deaf to SIGINT: a Ctrl-C in a terminal reaches the whole process group, and the server
  decides when its worker ends.

What crosses: the function, by its module and name (so it is a module-level function), its
arguments (text, JSON values, `SpecLimits`), and its result or exception, which the worker
pickles (a `MappingProxyType`, in which specs freeze their mappings, as the dict it wraps)
and which is unpickled here, on the event loop. Unpickling a 1000-step DAG spec takes about
2 ms, too long to hold the loop in one piece: `run_in_pieces` has the worker pickle the
result's parts (a spec's steps) one by one ahead of the result, with one pickler, so the
result refers to them and the objects they share cross once; here each part is unpickled in
turn, with one unpickler, and the loop is given back whenever `SLICE_S` has passed. Freeing
such a result costs the loop too (about 0.15 ms for a 1000-step spec, more in a busy server);
`drop_in_pieces` lets go of its parts the same way.

A worker that dies with documents in hand (killed for its memory, a crash in an extension)
fails each of them with `WorkerLost`, and the next document starts a new worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import copyreg
import io
import multiprocessing
import os
import pickle
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from types import MappingProxyType
from typing import Any, Final, ParamSpec, TypeVar, cast

P = ParamSpec("P")
T = TypeVar("T")

#: How much the worker lowers its CPU priority (`os.nice`): at 10, a worker competing for a
#: core with the event loop or PostgreSQL gets about a tenth of it (docs/benchmarks.md has the
#: measurements against 0 and 19).
NICENESS: Final = 10
WORKERS: Final = 1  # documents take turns: however many arrive, they use one core at most
#: The longest the event loop unpickles a result's parts, or lets go of them, before it lets
#: other work run (the parts themselves take a few microseconds each). A request that becomes
#: ready meanwhile waits for at most one slice at each of its turns (a `tasks/get` takes four),
#: so a slice is kept well under what a `tasks/get` costs the loop.
SLICE_S: Final = 0.0001

_CONTEXT: Final = multiprocessing.get_context("spawn")
_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None
_users = 0  # servers holding the worker (`in_use`)


class TooDeep(Exception):
    """The call's arguments nest too deep to be handed to the worker (pickling them ran out
    of recursion); nothing was sent."""


class WorkerLost(Exception):
    """The process reading the document ended before it answered.

    It crashed or was killed (for its memory, say); the next document starts a new one.
    """

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (type(self).__doc__ or "").strip().splitlines()[0])


async def run(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` in the document worker; its exception is raised here.

    Raises:
        WorkerLost: the worker ended while it held this call.
        TooDeep: the arguments nest too deep to be handed over.
    """
    return cast(T, await _submit(fn, None, args, kwargs))


async def run_in_pieces(
    parts: Callable[[T], Iterable[object]],
    fn: Callable[P, T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """As `run`, for a large result: `parts(result)` (run in the worker, so a module-level
    function too) names objects within it, such as a spec's steps, that cross ahead of it and
    are unpickled here a few at a time, between other work on the event loop.

    Raises:
        WorkerLost: the worker ended while it held this call.
        TooDeep: the arguments nest too deep to be handed over.
    """
    return cast(T, await _submit(fn, parts, args, kwargs))


async def _submit(
    fn: Callable[..., Any],
    parts: Callable[[Any], Iterable[object]] | None,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> Any:
    pool = _running()
    try:
        packed = await asyncio.wrap_future(pool.submit(_call, fn, parts, args, kwargs))
    except BrokenProcessPool as exc:
        _forget(pool)
        raise WorkerLost() from exc
    except RecursionError:
        # Raised here only by pickling the arguments: the worker's own errors come back
        # inside `packed`.
        raise TooDeep() from None
    returned, value = await _loads(packed)
    if returned:
        return value
    raise value


async def _loads(packed: bytes) -> Any:
    """What `_dumps` wrote: its parts unpickled in turn, the loop given back whenever
    `SLICE_S` has passed; then, on a turn of its own, the result, which finds the parts in
    the unpickler's memo (and the end of the unpickler, whose memo holds them all); then the
    loop once more, so that the caller's own work with the result starts a turn of its own."""
    # What the worker pickled: objects our loaders built from the document (its text only
    # ever becomes strings, numbers and containers in them), never bytes a caller wrote.
    unpickler = pickle.Unpickler(io.BytesIO(packed))  # noqa: S301
    count = unpickler.load()
    slice_ends = time.perf_counter() + SLICE_S
    for _ in range(count):
        unpickler.load()
        if time.perf_counter() >= slice_ends:
            await asyncio.sleep(0)
            slice_ends = time.perf_counter() + SLICE_S
    if count:
        await asyncio.sleep(0)
    value = unpickler.load()
    del unpickler  # its memo: a reference to every part
    if count:
        await asyncio.sleep(0)
    return value


async def drop_in_pieces(parts: list[Any]) -> None:
    """Empty `parts`, which may hold the last references to a document's parts (the steps of
    a spec another replaced), a slice at a time: freeing a 1000-step spec in one piece holds
    the event loop as long as a slice of `run_in_pieces` several times over."""
    while parts:
        await asyncio.sleep(0)  # each slice on a turn of its own, the first one too
        slice_ends = time.perf_counter() + SLICE_S
        parts.pop()
        while parts and time.perf_counter() < slice_ends:
            parts.pop()


@contextlib.contextmanager
def in_use() -> Iterator[None]:
    """Hold the worker for a server: when the last server holding it leaves, it is shut down
    (`shutdown`). Servers in one process share the one worker; none stops it under another."""
    global _users
    with _lock:
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            last = _users == 0
        if last:
            shutdown()


def shutdown(*, wait: bool = False) -> None:
    """Stop the worker: documents not yet begun are cancelled, and the worker exits once the
    one in hand is read (the limits bound its cost). `wait`: return only once it has exited
    (else this returns at once, and the interpreter waits for it on its way out). The next
    `run` starts a new worker."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=wait, cancel_futures=True)


def _running() -> ProcessPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(
                WORKERS, mp_context=_CONTEXT, initializer=_start_worker, initargs=(NICENESS,)
            )
        return _pool


def _forget(pool: ProcessPoolExecutor) -> None:
    """Drop a broken pool (unless another call already did) so the next call starts anew."""
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    pool.shutdown(wait=False)


# --- in the worker -----------------------------------------------------------------------------


def _start_worker(niceness: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(os, "nice"):  # not on Windows, where the worker keeps the server's priority
        os.nice(niceness)


def _call(
    fn: Callable[..., Any],
    parts: Callable[[Any], Iterable[object]] | None,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> bytes:
    """`fn`'s result as `(True, result)`, after `parts(result)` one by one, or its exception
    as `(False, exc)`, pickled (`_dumps`). The exception carries its traceback here as a note
    (the caller's ends where it is raised again); one that would not pickle and unpickle (a
    constructor that takes other arguments than it keeps) is sent as a RuntimeError naming
    it, so the caller still gets an error."""
    try:
        value = fn(*args, **kwargs)
        return _dumps((True, value), () if parts is None else parts(value))
    except Exception as exc:  # noqa: BLE001 — every exception goes back to the caller
        raised = exc
    raised.add_note("in the document worker:\n" + "".join(traceback.format_exception(raised)))
    try:
        packed = _dumps((False, raised))
        _loads_now(packed)  # our own pickle, tried before it is sent
    except Exception:  # noqa: BLE001 — any failure to cross
        return _dumps((False, RuntimeError(f"{type(raised).__qualname__}: {raised}")))
    return packed


def _mapping_proxy(mapping: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(mapping)


def _reduce_proxy(proxy: MappingProxyType[Any, Any]) -> tuple[Any, ...]:
    return (_mapping_proxy, (dict(proxy),))


_REDUCERS: Final = {**copyreg.dispatch_table, MappingProxyType: _reduce_proxy}


def _dumps(value: object, parts: Iterable[object] = ()) -> bytes:
    """How many parts, each part, then `value`, pickled in turn by one pickler: its memo
    carries from one to the next, so `value` refers to the parts (and they to what they
    share) instead of holding copies."""
    ahead = tuple(parts)
    out = io.BytesIO()
    pickler = pickle.Pickler(out, pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _REDUCERS  # this pickler's own table: copyreg's stays as it is
    pickler.dump(len(ahead))
    for part in ahead:
        pickler.dump(part)
    pickler.dump(value)
    return out.getvalue()


def _loads_now(packed: bytes) -> Any:
    """What `_dumps` wrote, read in one piece."""
    unpickler = pickle.Unpickler(io.BytesIO(packed))  # noqa: S301 — our own pickle
    for _ in range(unpickler.load()):
        unpickler.load()
    return unpickler.load()
