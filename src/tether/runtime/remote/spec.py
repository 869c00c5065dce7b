"""The MCP facts the remote client speaks (2026-07-28 core, Streamable HTTP, Tasks extension).

The runtime may not import the server's protocol layer (`tether.jsonrpc`), so the client keeps
its own copy of the few facts it sends and reads; tests/test_protocol_copies.py holds each copy
equal to the server's constant.
"""

from __future__ import annotations

from typing import Final

VERSION: Final = "2026-07-28"
TASKS: Final = "io.modelcontextprotocol/tasks"

# _meta keys of every request
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
#: The W3C trace context, as MCP servers read it from `_meta` (beside the HTTP header).
META_TRACEPARENT: Final = "traceparent"

# HTTP headers (names as sent; servers compare them case-insensitively)
H_PROTOCOL_VERSION: Final = "mcp-protocol-version"
H_METHOD: Final = "mcp-method"
H_NAME: Final = "mcp-name"
#: `Mcp-Param-{Name}`: a tool argument whose input schema names it (`X_MCP_HEADER`), mirrored.
H_PARAM_PREFIX: Final = "mcp-param-"
X_MCP_HEADER: Final = "x-mcp-header"
BASE64_PREFIX: Final = "=?base64?"
BASE64_SUFFIX: Final = "?="
#: Tether's header for a crash-safe create: the same key returns the same task.
IDEMPOTENCY_HEADER: Final = "idempotency-key"
JSON: Final = "application/json"
SSE: Final = "text/event-stream"

# JSON-RPC codes the client tells apart
INVALID_PARAMS: Final = -32602
METHOD_NOT_FOUND: Final = -32601
HEADER_MISMATCH: Final = -32020

# results
RESULT_COMPLETE: Final = "complete"
RESULT_TASK: Final = "task"
RESULT_INPUT_REQUIRED: Final = "input_required"
TASK_STATUSES: Final = ("working", "input_required", "completed", "failed", "cancelled")
ELICITATION: Final = "elicitation/create"

# methods
TOOLS_CALL: Final = "tools/call"
TASKS_GET: Final = "tasks/get"
TASKS_UPDATE: Final = "tasks/update"
TASKS_CANCEL: Final = "tasks/cancel"
TOOLS_LIST: Final = "tools/list"
#: The stream of pushed notifications; its first frame says what the server agreed to send.
LISTEN: Final = "subscriptions/listen"
LISTEN_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
#: A task's view (a `tasks/get` result without `resultType`), pushed on a listen stream.
TASK_NOTIFICATION: Final = "notifications/tasks"
