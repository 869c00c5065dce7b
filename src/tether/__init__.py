"""Tether: durable, long-running work for AI agents, on PostgreSQL."""

from __future__ import annotations

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

__version__ = "0.1.0"

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
