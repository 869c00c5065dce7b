"""Bytes ↔ JSON-RPC messages. One message per body; batches are refused (MCP 2026-07-28)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from tether.jsonrpc.errors import InvalidRequest, JsonRpcError, ParseError

RequestId = str | int


@dataclass(frozen=True)
class Message:
    """A decoded request (id set) or notification (id None)."""

    method: str
    params: Any  # the raw `params` value; None when absent
    id: RequestId | None
    has_params: bool

    @property
    def is_notification(self) -> bool:
        return self.id is None


class DecodeError(Exception):
    """A body that cannot be served, with the id to answer under (None: unreadable)."""

    def __init__(self, error: JsonRpcError, request_id: RequestId | None) -> None:
        super().__init__(error.message)
        self.error = error
        self.request_id = request_id


def _valid_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def decode(body: bytes) -> Message:
    """Parse one JSON-RPC request or notification. Raises DecodeError."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise DecodeError(ParseError(), None) from None
    if isinstance(obj, list):
        raise DecodeError(InvalidRequest("Invalid Request: batches are not supported"), None)
    if not isinstance(obj, dict):
        raise DecodeError(InvalidRequest("Invalid Request: expected a JSON object"), None)
    raw_id = obj.get("id")
    request_id = raw_id if _valid_id(raw_id) else None
    if obj.get("jsonrpc") != "2.0":
        raise DecodeError(InvalidRequest('Invalid Request: "jsonrpc" must be "2.0"'), request_id)
    method = obj.get("method")
    if not isinstance(method, str) or not method:
        what = "a response" if ("result" in obj or "error" in obj) else "no method"
        raise DecodeError(InvalidRequest(f"Invalid Request: {what}"), request_id)
    if "id" in obj and request_id is None:
        raise DecodeError(
            InvalidRequest("Invalid Request: id must be a string or an integer"), None
        )
    return Message(method, obj.get("params"), request_id, "params" in obj)


def encode_result(request_id: RequestId, result: dict[str, Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def encode_error(request_id: RequestId | None, error: JsonRpcError) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()})


def encode_notification(method: str, params: dict[str, Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": method, "params": params})
