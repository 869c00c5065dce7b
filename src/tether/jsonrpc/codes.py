"""Spec facts: JSON-RPC error codes, MCP protocol versions, header and `_meta` names.

Sources: JSON-RPC 2.0; MCP 2026-07-28 basic/index (error codes and their allocation),
transports/streamable-http (headers, statuses); ext-tasks 2026-07-28.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

# --- JSON-RPC 2.0 ---------------------------------------------------------------------------
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

# --- MCP 2026-07-28 (the -32020..-32099 range belongs to the spec) ----------------------------
HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

# --- Tether application errors (outside -32768..-32000, as the spec asks) ---------------------
#: The server is up but cannot serve now (database unreachable, starting up); retry later.
UNAVAILABLE: Final = -31000
#: The caller is authenticated but not allowed to do this.
UNAUTHORIZED: Final = -31001
#: The caller did not present valid credentials.
UNAUTHENTICATED: Final = -31002
#: Too many requests (or open streams) for this caller now; retry after the `Retry-After` delay.
RATE_LIMITED: Final = -31003
#: A per-principal or per-stream limit was reached (open subscriptions, a stream that fell
#: behind); close something and retry.
LIMIT_REACHED: Final = -31010

#: A reason that refines the HTTP status of a code (the wire code stays the same): a -32602 for a
#: required `_meta` key that is missing or malformed marks a malformed request (HTTP 400, the
#: one status the spec fixes for -32602), where a semantic -32602 (unknown task, bad argument)
#: is 200: the spec leaves that status open, and 200 is the common reading.
MALFORMED_META: Final = "malformed-meta"

#: The HTTP status for each error code, and for a code with a reason that refines it; anything
#: not listed is 200. The one place that decides a status (see http_status).
HTTP_STATUS: Final[Mapping[int | tuple[int, str], int]] = MappingProxyType(
    {
        PARSE_ERROR: 400,
        INVALID_REQUEST: 400,
        METHOD_NOT_FOUND: 404,
        HEADER_MISMATCH: 400,
        MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
        UNSUPPORTED_PROTOCOL_VERSION: 400,
        UNAVAILABLE: 503,
        UNAUTHORIZED: 403,
        UNAUTHENTICATED: 401,
        RATE_LIMITED: 429,
        LIMIT_REACHED: 429,
        (INVALID_PARAMS, MALFORMED_META): 400,
    }
)


def http_status(code: int, reason: str | None = None) -> int:
    """The HTTP status of an error with `code` (and the reason that refines it, if any)."""
    if reason is not None:
        refined = HTTP_STATUS.get((code, reason))
        if refined is not None:
            return refined
    return HTTP_STATUS.get(code, 200)


# --- versions ---------------------------------------------------------------------------------
MODERN_VERSION: Final = "2026-07-28"
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18")
SUPPORTED_VERSIONS: Final = (MODERN_VERSION, *LEGACY_VERSIONS)

# --- headers (names compare case-insensitively; Starlette lower-cases them) --------------------
H_PROTOCOL_VERSION: Final = "mcp-protocol-version"
H_METHOD: Final = "mcp-method"
H_NAME: Final = "mcp-name"
H_PARAM_PREFIX: Final = "mcp-param-"
H_SESSION_ID: Final = "mcp-session-id"
BASE64_PREFIX: Final = "=?base64?"
BASE64_SUFFIX: Final = "?="

# --- _meta keys -----------------------------------------------------------------------------
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"

# --- extensions ---------------------------------------------------------------------------------
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
#: The task statuses a task never leaves (ext-tasks).
TERMINAL_TASK_STATUSES: Final = frozenset({"completed", "failed", "cancelled"})

# --- methods and notifications that more than one layer names ---------------------------------
TOOLS_CALL: Final = "tools/call"
#: The 2026-07-28 stream of pushed notifications (task views, resource and list changes).
LISTEN: Final = "subscriptions/listen"
#: The first frame of a listen stream: which notifications the server agreed to send.
LISTEN_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
#: A task's view, pushed on a listen stream each time it changes (ext-tasks).
TASK_NOTIFICATION: Final = "notifications/tasks"

#: Methods removed in 2026-07-28 (and legacy task methods); always -32601 under it.
REMOVED_METHODS: Final = frozenset(
    {
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tasks/result",
        "tasks/list",
    }
)

#: Methods whose `Mcp-Name` header mirrors a body field, and which field.
NAME_FIELDS: Final = MappingProxyType(
    {
        "tools/call": "name",
        "prompts/get": "name",
        "resources/read": "uri",
        "tasks/get": "taskId",
        "tasks/update": "taskId",
        "tasks/cancel": "taskId",
    }
)
#: Of those, the methods on which a missing `Mcp-Name` is tolerated (common clients omit it).
NAME_OPTIONAL: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
