"""Tether: durable, long-running work for AI agents, on PostgreSQL.

The public API is what this package exports (`__all__`): the `App` that registers
workflows (and `Exposure`, how one is served over MCP), the `Context` of their durable calls,
the retry policy, the wait specs and the results they return, the errors workflow code
raises or catches, and the channels that notify people of waits (with the check a webhook
receiver runs on a signature). Two more packages are public by the same rule, each through its own
`__all__`: `tether.testing` (testing your workflows) and `tether.client` (driving runs from
application code). So are the `tether` and `tether-conformance` commands.

Every other module (`tether.runtime`, `tether.storage`, `tether.tools`, ...) is internal and
may change without notice, even where a public signature names one of its types; a public
class's members are the ones its API reference documents. Import public names from
`tether`, not from the module that defines them. A test holds the API reference in `docs/api`
to exactly these names.

The public names load lazily, so `tether.conformance` (a black-box harness that must not
need the runtime) can be imported without it.
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
    "DagSpecError": "tether.specs.dag",
    "EmailChannel": "tether.runtime.notify.channels",
    "Exposure": "tether.runtime.exposure",
    "HumanTask": "tether.runtime.waits",
    "NonDeterminism": "tether.runtime.errors",
    "PlanError": "tether.runtime.realm.plan",
    "ProtocolError": "tether.runtime.errors",
    "PushedBack": "tether.runtime.waits",
    "Rejected": "tether.runtime.errors",
    "RemoteCancelled": "tether.runtime.remote.errors",
    "RemoteConfigError": "tether.runtime.remote.config",
    "RemoteError": "tether.runtime.remote.errors",
    "RemoteProtocolError": "tether.runtime.remote.errors",
    "RemoteRejected": "tether.runtime.remote.errors",
    "RemoteTaskLost": "tether.runtime.remote.errors",
    "RemoteTimeout": "tether.runtime.remote.errors",
    "RemoteToolError": "tether.runtime.remote.errors",
    "RemoteUnavailable": "tether.runtime.remote.errors",
    "RetryPolicy": "tether.runtime.policy",
    "Signal": "tether.runtime.waits",
    "SlackChannel": "tether.runtime.notify.channels",
    "StepFailed": "tether.runtime.errors",
    "ToolContext": "tether.tools.context",
    "ToolError": "tether.tools.context",
    "UnknownRemote": "tether.runtime.remote.errors",
    "Update": "tether.runtime.waits",
    "UpdateContext": "tether.runtime.executor",
    "UpdateReceived": "tether.runtime.waits",
    "WaitTimeout": "tether.runtime.errors",
    "WebhookChannel": "tether.runtime.notify.channels",
    "verify_webhook_signature": "tether.runtime.notify.signing",
}

__all__ = [
    "AgentStep",
    "App",
    "Approval",
    "Approved",
    "Completed",
    "Context",
    "DagSpecError",
    "EmailChannel",
    "Exposure",
    "HumanTask",
    "NonDeterminism",
    "PlanError",
    "ProtocolError",
    "PushedBack",
    "Rejected",
    "RemoteCancelled",
    "RemoteConfigError",
    "RemoteError",
    "RemoteProtocolError",
    "RemoteRejected",
    "RemoteTaskLost",
    "RemoteTimeout",
    "RemoteToolError",
    "RemoteUnavailable",
    "RetryPolicy",
    "Signal",
    "SlackChannel",
    "StepFailed",
    "ToolContext",
    "ToolError",
    "UnknownRemote",
    "Update",
    "UpdateContext",
    "UpdateReceived",
    "WaitTimeout",
    "WebhookChannel",
    "__version__",
    "verify_webhook_signature",
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
    from tether.runtime.executor import UpdateContext
    from tether.runtime.exposure import Exposure
    from tether.runtime.notify.channels import EmailChannel, SlackChannel, WebhookChannel
    from tether.runtime.notify.signing import verify_webhook_signature
    from tether.runtime.policy import RetryPolicy
    from tether.runtime.realm.plan import PlanError
    from tether.runtime.registry import App
    from tether.runtime.remote.config import RemoteConfigError
    from tether.runtime.remote.errors import (
        RemoteCancelled,
        RemoteError,
        RemoteProtocolError,
        RemoteRejected,
        RemoteTaskLost,
        RemoteTimeout,
        RemoteToolError,
        RemoteUnavailable,
        UnknownRemote,
    )
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
    from tether.specs.dag import DagSpecError
    from tether.tools.context import ToolContext, ToolError


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
