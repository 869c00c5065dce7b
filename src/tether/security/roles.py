"""What a role may call (DESIGN.md §6): `reader` (discover, lists, read-only tools, prompts,
resources), `operator` (also every mutation: tools that start or steer runs, and every tasks/*
method — a reader cannot poll a task), `admin` (everything).

Applied by the MCP endpoint once the method is known, to the principal the security middleware
put in the ASGI scope; it never looks at a header.
"""

from __future__ import annotations

import logging
from typing import Final

from tether.jsonrpc.errors import Unauthorized
from tether.jsonrpc.router import RequestContext
from tether.security.tokens import ANONYMOUS, Principal

audit = logging.getLogger("tether.audit")

# One audit line per call that acts (DESIGN.md §6: "per tool call"). tasks/get is a poll an
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
    principal = ctx.principal if isinstance(ctx.principal, Principal) else ANONYMOUS
    reads = ctx.method in READ_METHODS or (ctx.method == "tools/call" and read_only_tool)
    if ctx.method in AUDITED_METHODS:
        name = ctx.params.get("name") if ctx.method == "tools/call" else None
        audit.info("%s %s by %s", ctx.method, name or "-", principal.name)
    if reads or principal.may_mutate:
        return
    raise Unauthorized(f"{principal.name} ({principal.role}) may not call {ctx.method}")
