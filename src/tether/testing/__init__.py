"""A test kit for workflows, and the apps Tether's own conformance runs use.

For users' tests (docs/testing.md):

    async with tether.testing.WorkflowEnvironment(app) as env:
        run = await env.start("review", {"title": "Q3 plan", "body": "…"})
        await env.approve(run, "publish", inputs={"ticket": "CHG-42"})
        assert await env.result(run) == "published with CHG-42"

`WorkflowEnvironment` runs the App on a database of its own with a worker in the test's
process, skips time while nothing can run, answers waits through the runtime's one answer
path, simulates a worker dying at a chosen step, and reads a run's history. The pytest plugin
(`tether.testing.pytest_plugin`, loaded by the `pytest11` entry point) gives the
`tether_env`, `tether_app` and `tether_databases` fixtures.

`tether.testing.conformance:app` is the fixture app of the official MCP conformance suite
(`tether serve tether.testing.conformance:app`); it is not part of the kit.

The kit sits on the runtime's operations; it imports no entry point (app, cli, loader, …) and
no storage module. Names load lazily, so the pytest plugin costs nothing until a fixture runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "AnswerConflict": "tether.testing.errors",
    "AnswerRejected": "tether.testing.errors",
    "Crash": "tether.testing.crashes",
    "DatabaseUnavailable": "tether.testing.errors",
    "Databases": "tether.testing.databases",
    "Event": "tether.testing.records",
    "InvalidInput": "tether.testing.errors",
    "KitError": "tether.testing.errors",
    "OpenWait": "tether.testing.records",
    "RunEnded": "tether.testing.errors",
    "RunFailed": "tether.testing.errors",
    "RunInfo": "tether.testing.records",
    "RunNotFound": "tether.testing.errors",
    "Step": "tether.testing.records",
    "WaitNotOpen": "tether.testing.errors",
    "WaitTimedOut": "tether.testing.errors",
    "WorkflowEnvironment": "tether.testing.environment",
    "WorkflowNotFound": "tether.testing.errors",
}

__all__ = [
    "AnswerConflict",
    "AnswerRejected",
    "Crash",
    "DatabaseUnavailable",
    "Databases",
    "Event",
    "InvalidInput",
    "KitError",
    "OpenWait",
    "RunEnded",
    "RunFailed",
    "RunInfo",
    "RunNotFound",
    "Step",
    "WaitNotOpen",
    "WaitTimedOut",
    "WorkflowEnvironment",
    "WorkflowNotFound",
]

if TYPE_CHECKING:
    from tether.testing.crashes import Crash
    from tether.testing.databases import Databases
    from tether.testing.environment import WorkflowEnvironment
    from tether.testing.errors import (
        AnswerConflict,
        AnswerRejected,
        DatabaseUnavailable,
        InvalidInput,
        KitError,
        RunEnded,
        RunFailed,
        RunNotFound,
        WaitNotOpen,
        WaitTimedOut,
        WorkflowNotFound,
    )
    from tether.testing.records import Event, OpenWait, RunInfo, Step


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tether.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
