"""How `tether serve` and `tether worker` stop on a signal, in two steps.

The first SIGINT (Ctrl-C) or SIGTERM asks the process to stop and says what it waits for: the
runs in flight, each given up to the shutdown grace (TETHER_SHUTDOWN_GRACE_S) to finish or
pause before its lease is handed back. A second signal stops the process at once: nothing more
is waited for, the embedded PostgreSQL (if this process started it) is stopped, and the runs
still in flight keep their leases until those expire, when any server takes them up again from
their last recorded step, as after a crash. No run is lost either way.

The handlers run between two bytecodes of whatever the main thread is doing, so they write
with `os.write` (no buffered stream that the interrupted code may be in the middle of) and ask
the event loop to stop through a callback that is safe there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Final

from tether.cli.loaded import plural

SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


def first_line(in_flight: int, grace_s: float) -> str:
    """What the first signal is answered with: what the process now waits for."""
    if in_flight == 0:
        return "tether: stopping (no run in flight); Ctrl-C again to stop now"
    return (
        f"tether: stopping: finishing {plural(in_flight, 'run')} in flight, up to "
        f"{grace_s:g} s; Ctrl-C again to stop now"
    )


def last_line(in_flight: int, lease_s: float) -> str:
    """What a second signal is answered with: what becomes of the runs left in flight."""
    if in_flight == 0:
        return "tether: stopped now"
    if in_flight == 1:
        runs, leases = "the run in flight resumes", "its lease expires"
    else:
        runs, leases = f"the {in_flight} runs in flight resume", "their leases expire"
    return (
        f"tether: stopped now; {runs} on the next server once {leases} "
        f"(within {lease_s:g} s), from the last recorded step"
    )


class Stopping:
    """The two-step stop of one server process (see the module docstring).

    `request` asks the process to stop (called once, from the signal handler: it must be safe
    there, e.g. set a flag or `loop.call_soon_threadsafe`); `in_flight` counts the runs this
    process is executing; `stop_now` releases what must not outlive the process (the embedded
    database) before it exits at once.
    """

    def __init__(
        self,
        request: Callable[[], None],
        in_flight: Callable[[], int],
        *,
        grace_s: float,
        lease_s: float,
        stop_now: Callable[[], None],
        exit_now: Callable[[int], None] = os._exit,
    ) -> None:
        self._request = request
        self._in_flight = in_flight
        self._grace_s = grace_s
        self._lease_s = lease_s
        self._stop_now = stop_now
        self._exit_now = exit_now
        self.signal: int | None = None  # the first signal received

    @property
    def exit_code(self) -> int:
        """0 when no signal came, else 128 + the first signal's number (130 for Ctrl-C)."""
        return 0 if self.signal is None else 128 + self.signal

    def handle(self, signum: int, _frame: object = None) -> None:
        if self.signal is None:
            self.signal = signum
            _say(first_line(self._in_flight(), self._grace_s))
            self._request()
            return
        _say(last_line(self._in_flight(), self._lease_s))
        # The process exits whatever stopping the database raised (it is a subprocess's error
        # at worst); the user already has the line.
        with contextlib.suppress(Exception):
            self._stop_now()
        self._exit_now(self.exit_code)

    @contextlib.contextmanager
    def installed(self) -> Iterator[Stopping]:
        """Handle SIGINT and SIGTERM in the block; the previous handlers are put back after."""
        previous = {sig: signal.signal(sig, self.handle) for sig in SIGNALS}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _say(line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(sys.stderr.fileno(), (line + "\n").encode())
