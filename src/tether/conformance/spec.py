"""The harness's own copy of the spec facts it checks (MCP 2026-07-28 + the Tasks extension).

The harness is black-box and imports nothing else from tether, so it keeps its own constants:
each one that the server also defines (`tether.jsonrpc.codes`, `tether.jsonrpc.headers`) is
repeated here on purpose, and `tests/conformance/test_spec_constants.py` checks that every
such copy agrees with the server's.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

# --- versions -----------------------------------------------------------------------------
VERSION: Final = "2026-07-28"
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18")
UNKNOWN_VERSION: Final = "1900-01-01"
FUTURE_VERSION: Final = "2099-01-01"

# --- JSON-RPC 2.0 error codes ---------------------------------------------------------------
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

# --- MCP 2026-07-28 error codes (the -32020..-32099 range belongs to the spec) ---------------
HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
SPEC_RANGE: Final = range(-32099, -32019)
SPEC_CODES: Final = frozenset(
    {HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}
)
#: The legacy sub-range new implementations should not emit.
LEGACY_RANGE: Final = range(-32019, -31999)
#: Obsolete draft codes and codes 2026-07-28 implementations must not emit.
FORBIDDEN_CODES: Final = frozenset({-32001, -32002, -32003, -32004, -32042})

#: HTTP statuses the spec fixes for error codes (-32700/-32600 are the usual reading).
HTTP_STATUS: Final = MappingProxyType(
    {
        PARSE_ERROR: 400,
        INVALID_REQUEST: 400,
        METHOD_NOT_FOUND: 404,
        HEADER_MISMATCH: 400,
        MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
        UNSUPPORTED_PROTOCOL_VERSION: 400,
    }
)

# --- headers (names are case-insensitive) ------------------------------------------------------
H_PROTOCOL_VERSION: Final = "MCP-Protocol-Version"
H_METHOD: Final = "Mcp-Method"
H_NAME: Final = "Mcp-Name"
H_PARAM_PREFIX: Final = "Mcp-Param-"
H_SESSION_ID: Final = "Mcp-Session-Id"
H_LAST_EVENT_ID: Final = "Last-Event-ID"
H_ACCEL_BUFFERING: Final = "X-Accel-Buffering"
BASE64_PREFIX: Final = "=?base64?"
BASE64_SUFFIX: Final = "?="
JSON: Final = "application/json"
SSE: Final = "text/event-stream"
ACCEPT: Final = f"{JSON}, {SSE}"
#: The `inputSchema` property keyword naming an argument's `Mcp-Param-{Name}` header.
X_MCP_HEADER: Final = "x-mcp-header"

# --- _meta keys ---------------------------------------------------------------------------------
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
META_RELATED_TASK: Final = "io.modelcontextprotocol/related-task"

# --- Tasks extension ------------------------------------------------------------------------------
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
TASK_STATUSES: Final = frozenset({"working", "input_required", "completed", "failed", "cancelled"})
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
LISTEN: Final = "subscriptions/listen"
LISTEN_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
TASK_NOTIFICATION: Final = "notifications/tasks"
INPUT_METHODS: Final = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
#: Keys that belong to a task (none may appear on an update or cancel acknowledgement).
TASK_FIELDS: Final = frozenset({"taskId", "status", "result", "error", "inputRequests"})
CACHE_SCOPES: Final = frozenset({"public", "private"})

#: Methods removed in 2026-07-28 (and the legacy task methods): -32601 under it.
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

# --- client capability declarations (CHECKLIST: M+T and M0) ---------------------------------------
CAPS_NONE: Final[Mapping[str, Any]] = MappingProxyType({})
CAPS_TASKS: Final[Mapping[str, Any]] = MappingProxyType(
    {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}
)
CAPS_TASKS_ONLY: Final[Mapping[str, Any]] = MappingProxyType({"extensions": {TASKS_EXTENSION: {}}})
CAPS_LEGACY_TASKS: Final[Mapping[str, Any]] = MappingProxyType(
    {"tasks": {"requests": {"tools": {"call": {}}}}}
)

# --- spec URLs ----------------------------------------------------------------------------------
_SITE: Final = "https://modelcontextprotocol.io/specification/2026-07-28"
URL_BASIC: Final = f"{_SITE}/basic"
URL_MESSAGES: Final = f"{_SITE}/basic#messages"
URL_ERRORS: Final = f"{_SITE}/basic#error-codes"
URL_META: Final = f"{_SITE}/basic#meta"
URL_TRANSPORT: Final = f"{_SITE}/basic/transports/streamable-http"
URL_SECURITY: Final = f"{URL_TRANSPORT}#security-warning"
URL_HEADERS: Final = f"{URL_TRANSPORT}#standard-request-headers"
URL_VALIDATION: Final = f"{URL_TRANSPORT}#server-validation"
URL_ENCODING: Final = f"{URL_TRANSPORT}#value-encoding"
URL_CUSTOM_HEADERS: Final = f"{URL_TRANSPORT}#custom-headers"
URL_VERSIONING: Final = f"{_SITE}/basic/versioning"
URL_DISCOVER: Final = f"{_SITE}/server/discover"
URL_CACHING: Final = f"{_SITE}/server/utilities/caching"
URL_TOOLS: Final = f"{_SITE}/server/tools"
URL_MRTR: Final = f"{_SITE}/basic/patterns/mrtr"
URL_ELICITATION: Final = f"{_SITE}/client/elicitation"
URL_SUBSCRIPTIONS: Final = f"{_SITE}/basic/patterns/subscriptions"
_TASKS: Final = (
    "https://github.com/modelcontextprotocol/ext-tasks/blob/main/specification/draft/tasks.md"
)
URL_TASKS: Final = _TASKS
URL_TASKS_CAPABILITY: Final = f"{_TASKS}#capability-negotiation"
URL_TASKS_CREATE: Final = f"{_TASKS}#creating-tasks"
URL_TASKS_GET: Final = f"{_TASKS}#getting-tasks"
URL_TASKS_UPDATE: Final = f"{_TASKS}#updating-tasks"
URL_TASKS_CANCEL: Final = f"{_TASKS}#cancelling-tasks"
URL_TASKS_HEADERS: Final = f"{_TASKS}#streamable-http-routing-headers"
URL_TASKS_ERRORS: Final = f"{_TASKS}#error-handling"
URL_TASKS_NOTIFICATIONS: Final = f"{_TASKS}#status-notifications"
URL_TASKS_SECURITY: Final = f"{_TASKS}#security-considerations"
URL_TASKS_COMPAT: Final = (
    "https://github.com/modelcontextprotocol/modelcontextprotocol/blob/main/seps/"
    "2663-tasks-extension.md#backward-compatibility"
)
#: How the official suite reads the spec where the text is silent (checklist tag [S9]).
URL_OFFICIAL_SUITE: Final = "https://github.com/modelcontextprotocol/conformance"
