"""The runtime's clock: what time it is for durable timers, wait deadlines, retry backoff, run
deadlines and `ctx.now()`.

Time is read in two places, and each has one seam:

* Python: every reading goes through `now()`, the system clock unless a clock is `installed`
  (tether.testing's time skipping installs one that runs ahead: runtime/skipping.py).
* SQL: every statement reads `tether_now()` (migration 0008), which is now() on a server's
  database; a test's own database can be made to run ahead (runtime/skipping.py).

This module imports nothing of the runtime: every module that reads the time can import it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

#: A clock: returns the current time, timezone-aware.
Clock = Callable[[], datetime]


def system() -> datetime:
    """The system clock (UTC)."""
    return datetime.now(UTC)


_current: Clock = system


def now() -> datetime:
    """The current time for the runtime: the installed clock's, else the system's."""
    return _current()


@contextlib.contextmanager
def installed(clock: Clock) -> Iterator[None]:
    """Make `clock` the runtime's clock in this process while the block runs.

    One process has one clock: installing a clock while another is installed raises
    RuntimeError (two clocks that skip would fight over the process's time).
    """
    global _current
    if _current is not system:
        raise RuntimeError("another clock is installed in this process")
    _current = clock
    try:
        yield
    finally:
        _current = system
