"""`KILL_AT=<step point>:<edge>` for the worker processes of the kill tests: the worker SIGKILLs
itself, as a power cut would, when a run reaches that point (a step probe,
tether.runtime.probes)."""

from __future__ import annotations

import contextlib
import os
import signal

from tether.runtime import probes

_HELD: list[contextlib.AbstractContextManager[None]] = []


async def _die_at(point: probes.StepPoint) -> None:
    if os.environ.get("KILL_AT") == f"{point.step}:{point.edge}":
        os.kill(os.getpid(), signal.SIGKILL)


def install() -> None:
    """With KILL_AT set, install the probe for the whole life of this process (held here: a
    context manager that is collected would uninstall it)."""
    if os.environ.get("KILL_AT"):
        installed = probes.installed(_die_at)
        installed.__enter__()
        _HELD.append(installed)
