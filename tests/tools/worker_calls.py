"""What tests hand the document worker (`tether.tools.offload`) to run: it receives functions
by module and name, so they live in a module it can import."""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Callable
from multiprocessing.managers import SyncManager
from typing import Any, NoReturn

EXIT_STATUS = 70


class Held:
    """Stands in for a loader in the worker: blocks until released (at most 5 s), recording
    whether the release came while it was blocked. Its events live in `manager`, so the
    test process and the worker share them."""

    def __init__(self, manager: SyncManager, load: Callable[..., Any]) -> None:
        self.load = load
        self.started = manager.Event()
        self.release = manager.Event()
        self.released_in_time = manager.Event()

    def __getstate__(self) -> dict[str, Any]:
        """The loader goes by its module and name: in the test process that name now holds
        this stand-in, in the worker it still holds the loader."""
        return {**self.__dict__, "load": (self.load.__module__, self.load.__qualname__)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        module, name = state.pop("load")
        self.__dict__.update(state, load=getattr(importlib.import_module(module), name))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.started.set()
        if self.release.wait(timeout=5):
            self.released_in_time.set()
        return self.load(*args, **kwargs)


def exit_worker(*args: Any, **kwargs: Any) -> NoReturn:
    """Ends the process it runs in at once, as a crash would."""
    os._exit(EXIT_STATUS)


class Opaque(Exception):
    """An exception whose constructor needs an argument it does not keep, so pickle cannot
    rebuild it from its `args`."""

    def __init__(self, code: int, *, note: str) -> None:
        super().__init__(f"{note} ({code})")


def raise_opaque() -> NoReturn:
    raise Opaque(7, note="opaque")


class Reached(Exception):
    """The worker ran a call the test expected never to reach it."""


def must_not_run(*args: Any, **kwargs: Any) -> NoReturn:
    raise Reached()


#: What happened on the event loop while a result crossed (`Part`) or was let go (`Noted`),
#: in order: ("part", n) as part n was unpickled, ("freed", n) as it was freed, and
#: ("turn", n) when the loop next ran other work.
EVENTS: list[tuple[str, int]] = []


def _noted(event: str, n: int) -> None:
    EVENTS.append((event, n))
    asyncio.get_running_loop().call_soon(EVENTS.append, ("turn", n))


class Part:
    """A part of a result that notes its unpickling in `EVENTS` (in the process that
    unpickles it: the test's)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unpickled, (self.n,))


def _unpickled(n: int) -> Part:
    _noted("part", n)
    return Part(n)


def parts(count: int) -> tuple[Part, ...]:
    return tuple(Part(n) for n in range(count))


def each(value: tuple[Part, ...]) -> tuple[Part, ...]:
    return value


def no_parts(value: object) -> NoReturn:
    raise LookupError("no parts")


class Noted:
    """Notes its end in `EVENTS`."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __del__(self) -> None:
        _noted("freed", self.n)
