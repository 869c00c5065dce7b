"""The JSON-RPC error tree: one class per code; HTTP statuses come from codes.http_status
(a test parses this table and checks it against the classes, so it stays true).

JsonRpcError                             code HTTP  raised by
 ├── ParseError                        -32700  400  codec: body is not JSON
 ├── InvalidRequest                    -32600  400  codec: not a valid request envelope
 ├── MethodNotFound                    -32601  404  router: no such method (or removed)
 ├── InvalidParams                     -32602  200  router: params model; wire/errors.py
 │    └── InvalidMeta                  -32602  400  ladder: required `_meta` key missing
 ├── InternalError                     -32603  200  router: unexpected exception
 ├── HeaderMismatch                    -32020  400  ladder: header missing or ≠ body
 ├── MissingRequiredClientCapability   -32021  400  tasks, tools: extension not declared
 ├── UnsupportedProtocolVersion        -32022  400  ladder: version not served
 ├── Unavailable                       -31000  503  wire/errors.py: database down; app: starting
 ├── Unauthorized                      -31001  403  security: Host/Origin refused, role may not
 ├── Unauthenticated                   -31002  401  security: no or unknown bearer token
 ├── RateLimited                       -31003  429  security: request rate or open streams
 └── LimitReached                      -31010  429  mcp: too many subscriptions; stream behind
"""

from __future__ import annotations

from typing import Any, ClassVar

from tether.jsonrpc import codes


class JsonRpcError(Exception):
    """A JSON-RPC error."""

    code: ClassVar[int] = codes.INTERNAL_ERROR
    #: Refines the HTTP status of `code` (a key of codes.HTTP_STATUS); None for the code's own.
    status_reason: ClassVar[str | None] = None

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        self.message = message or (type(self).__doc__ or "").strip().splitlines()[0]
        self.data = data
        super().__init__(self.message)

    @property
    def http_status(self) -> int:
        return codes.http_status(self.code, self.status_reason)

    def to_wire(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(JsonRpcError):
    """Parse error: the body is not valid JSON."""

    code = codes.PARSE_ERROR


class InvalidRequest(JsonRpcError):
    """Invalid Request: not a JSON-RPC 2.0 request or notification."""

    code = codes.INVALID_REQUEST


class MethodNotFound(JsonRpcError):
    """Method not found."""

    code = codes.METHOD_NOT_FOUND


class InvalidParams(JsonRpcError):
    """Invalid params."""

    code = codes.INVALID_PARAMS


class InvalidMeta(InvalidParams):
    """Invalid params: a required `_meta` key is missing or malformed."""

    status_reason = codes.MALFORMED_META


class InternalError(JsonRpcError):
    """Internal error."""

    code = codes.INTERNAL_ERROR


class HeaderMismatch(JsonRpcError):
    """A required header is missing or does not match the body."""

    code = codes.HEADER_MISMATCH


class MissingRequiredClientCapability(JsonRpcError):
    """The request needs a client capability it did not declare."""

    code = codes.MISSING_REQUIRED_CLIENT_CAPABILITY

    def __init__(self, message: str | None = None, *, required: dict[str, Any]) -> None:
        super().__init__(message, {"requiredCapabilities": required})


class UnsupportedProtocolVersion(JsonRpcError):
    """Unsupported protocol version."""

    code = codes.UNSUPPORTED_PROTOCOL_VERSION

    def __init__(self, requested: str, supported: list[str]) -> None:
        super().__init__(
            f"Unsupported protocol version {requested!r}; supported: {', '.join(supported)}",
            {"supported": supported, "requested": requested},
        )


class Unavailable(JsonRpcError):
    """Service unavailable; retry later."""

    code = codes.UNAVAILABLE


class Unauthorized(JsonRpcError):
    """Not authorized."""

    code = codes.UNAUTHORIZED


class Unauthenticated(JsonRpcError):
    """Not authenticated."""

    code = codes.UNAUTHENTICATED


class RateLimited(JsonRpcError):
    """Too many requests."""

    code = codes.RATE_LIMITED


class LimitReached(JsonRpcError):
    """A limit was reached; close something and retry."""

    code = codes.LIMIT_REACHED


def tasks_capability_required(message: str | None = None) -> MissingRequiredClientCapability:
    """-32021 naming the Tasks extension."""
    return MissingRequiredClientCapability(
        message or f"this request needs the {codes.TASKS_EXTENSION} extension",
        required={"extensions": {codes.TASKS_EXTENSION: {}}},
    )
