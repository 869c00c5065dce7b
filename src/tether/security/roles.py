"""What a role may call (docs/security.md): `reader` (discover, lists, read-only tools, prompts,
resources), `operator` (also every mutation: tools that start or steer runs, and every tasks/*
method — a reader cannot poll a task), `admin` (everything).

Applied by the MCP endpoint once the method is known, to the principal the security middleware
put in the ASGI scope; it never looks at a header.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Final

from tether.jsonrpc.codes import UNAUTHENTICATED, UNAUTHORIZED
from tether.jsonrpc.errors import JsonRpcError, RateLimited, Unauthorized
from tether.jsonrpc.router import RequestContext
from tether.security.tokens import ANONYMOUS

audit = logging.getLogger("tether.audit")

# One audit line per call that acts (every tool call, update and cancel). tasks/get is a poll an
# agent sends every few seconds: it is authorized like a mutation but not audited.
AUDITED_METHODS: Final = frozenset({"tools/call", "tasks/update", "tasks/cancel"})
READ_METHODS: Final = frozenset(
    {
        "server/discover",
        "initialize",
        "ping",
        "tools/list",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
        "subscriptions/listen",  # following tasks is authorized as tasks/get (mcp/subscriptions)
        "logging/setLevel",
    }
)


def authorize(ctx: RequestContext, read_only_tool: bool) -> None:
    """Raises Unauthorized when the request's principal may not do this (no principal: the
    anonymous reader)."""
    principal = ANONYMOUS if ctx.principal is None else ctx.principal
    reads = ctx.method in READ_METHODS or (ctx.method == "tools/call" and read_only_tool)
    if ctx.method in AUDITED_METHODS:
        name = ctx.params.get("name") if ctx.method == "tools/call" else None
        audit.info("%s %s by %s", ctx.method, name or "-", principal.name)
    if reads or principal.may_mutate:
        return
    raise Unauthorized(f"{principal.name} ({principal.role}) may not call {ctx.method}")


@dataclass(frozen=True)
class AuditFacts:
    """What the audit trail records of one MCP call (the app adds the time and surface)."""

    principal: str
    tenant: str | None
    method: str
    tool: str | None
    execution_id: str | None
    outcome: str  # ok | refused | error
    error_code: int | None
    remote: str | None


def _execution_id(ctx: RequestContext, result: dict[str, Any] | None) -> str | None:
    """The run a call concerns: its taskId (params or a created task), or a tool's handle."""
    for source in (ctx.params, result or {}, ctx.params.get("arguments")):
        if isinstance(source, dict):
            for key in ("taskId", "handle", "execution_id"):
                value = source.get(key)
                if isinstance(value, str):
                    return value
    structured = (result or {}).get("structuredContent")
    if isinstance(structured, dict):
        value = structured.get("execution_id") or structured.get("taskId")
        return value if isinstance(value, str) else None
    return None


#: The codes a tool that authorizes itself (dagu_execute) refuses a caller with, as the
#: JSON-RPC codes the audit trail records for the same refusal by role.
_TOOL_REFUSALS: Final = {"unauthorized": UNAUTHORIZED, "unauthenticated": UNAUTHENTICATED}


def _tool_refusal(result: dict[str, Any] | None) -> int | None:
    structured = (result or {}).get("structuredContent")
    code = structured.get("code") if isinstance(structured, dict) else None
    return _TOOL_REFUSALS.get(code) if isinstance(code, str) else None


def audit_facts(
    ctx: RequestContext,
    result: dict[str, Any] | None,
    error: JsonRpcError | None,
    *,
    self_authorizing: bool = False,
) -> AuditFacts | None:
    """The audit facts of a call that acts (AUDITED_METHODS), or None for a call that is not
    audited (reads, tasks/get polls). A refusal by role or limit is `refused` — and so is the
    `unauthorized`/`unauthenticated` tool error of a tool that authorizes itself
    (`self_authorizing`); any other JSON-RPC error, or a tool result flagged isError, is
    `error` (with the code, if any)."""
    if ctx.method not in AUDITED_METHODS:
        return None
    principal = ANONYMOUS if ctx.principal is None else ctx.principal
    name = ctx.params.get("name") if ctx.method == "tools/call" else None
    if error is None:
        failed = result is not None and result.get("isError") is True
        code = _tool_refusal(result) if failed and self_authorizing else None
        outcome = "refused" if code is not None else "error" if failed else "ok"
    else:
        refused = isinstance(error, Unauthorized | RateLimited)
        outcome, code = ("refused" if refused else "error"), error.code
    return AuditFacts(
        principal=principal.name,
        tenant=principal.tenant,
        method=ctx.method,
        tool=name if isinstance(name, str) else None,
        execution_id=_execution_id(ctx, result),
        outcome=outcome,
        error_code=code,
        remote=ctx.remote,
    )
