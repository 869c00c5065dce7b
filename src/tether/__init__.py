"""Tether: durable, long-running work for AI agents, on PostgreSQL.

The public names load lazily, so `tether.conformance` (a black-box harness that must not need
the runtime) can be imported without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "AgentStep": "tether.runtime.waits",
    "App": "tether.runtime.registry",
    "Approval": "tether.runtime.waits",
    "Approved": "tether.runtime.waits",
    "Completed": "tether.runtime.waits",
    "Context": "tether.runtime.context",
    "HumanTask": "tether.runtime.waits",
    "NonDeterminism": "tether.runtime.errors",
    "ProtocolError": "tether.runtime.errors",
    "PushedBack": "tether.runtime.waits",
    "Rejected": "tether.runtime.errors",
    "RetryPolicy": "tether.runtime.policy",
    "Signal": "tether.runtime.waits",
    "StepFailed": "tether.runtime.errors",
    "Update": "tether.runtime.waits",
    "UpdateReceived": "tether.runtime.waits",
    "WaitTimeout": "tether.runtime.errors",
}

__all__ = [
    "AgentStep",
    "App",
    "Approval",
    "Approved",
    "Completed",
    "Context",
    "HumanTask",
    "NonDeterminism",
    "ProtocolError",
    "PushedBack",
    "Rejected",
    "RetryPolicy",
    "Signal",
    "StepFailed",
    "Update",
    "UpdateReceived",
    "WaitTimeout",
    "__version__",
]

if TYPE_CHECKING:
    from tether.runtime.context import Context
    from tether.runtime.errors import (
        NonDeterminism,
        ProtocolError,
        Rejected,
        StepFailed,
        WaitTimeout,
    )
    from tether.runtime.policy import RetryPolicy
    from tether.runtime.registry import App
    from tether.runtime.waits import (
        AgentStep,
        Approval,
        Approved,
        Completed,
        HumanTask,
        PushedBack,
        Signal,
        Update,
        UpdateReceived,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
