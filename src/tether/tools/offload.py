"""Work on caller-supplied documents, off the event loop: parsing and validating an inline DAG
spec or a `create_workflow` plan costs CPU in proportion to the document, and while it runs
on the loop every other request of the process waits.

One worker thread does it all, so however many callers send documents at once, they take
turns at one core's share and the loop keeps the rest; each document's cost is bounded by the
limits checked on it (`specs.limits`), which also bounds how long a stopping server waits for
the document in hand. The thread still shares the interpreter lock with the loop; see
`_yielding` for how it hands it back quickly.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

SWITCH_INTERVAL_S = 0.0005
_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tether-documents")


async def run(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` on the document thread; its exception is raised here."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_EXECUTOR, functools.partial(_yielding, fn, *args, **kwargs))


def _yielding(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn` with a shorter GIL switch interval while it runs: the loop thread, when it wakes,
    takes the interpreter back within half a millisecond rather than CPython's default five
    (each `tasks/get` wakes the loop two or three times). The interval is process-wide;
    nothing else in Tether sets it, and only this one thread runs documents, so a setting
    and its restoring never interleave."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        return fn(*args, **kwargs)
    finally:
        sys.setswitchinterval(previous)
