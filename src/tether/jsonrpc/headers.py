"""The header ladder (PURE): decide which protocol era a request speaks and check its routing
headers and `_meta` against the body, in this order (our reading of "Server Validation" on the
spec's Streamable HTTP transport page):

    version header → header ≠ _meta → version served → required _meta → Mcp-Method → Mcp-Name
    → Mcp-Param-* (tools/call, SEP-2243)

Legacy requests (the `initialize`-based 2025 revisions) skip the 2026 header rules. Every other
rule about a request header lives here too: the body's media type, whether the client takes
an SSE stream, and the Idempotency-Key. (Host, Origin and Authorization are the security
middleware's, applied to every route before any of these.)
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from tether.jsonrpc import codes
from tether.jsonrpc.codec import Message
from tether.jsonrpc.errors import (
    HeaderMismatch,
    InvalidMeta,
    InvalidParams,
    UnsupportedProtocolVersion,
)

Era = Literal["modern", "legacy"]
#: A tool's input schema by tool name (None for an unknown tool): what Mcp-Param-* mirror.
ParamSchema = Callable[[str], Mapping[str, Any] | None]

JSON: Final = "application/json"
SSE: Final = "text/event-stream"
#: Tether's own: a client may name a start's idempotency key in a header (it wins) or in `_meta`.
IDEMPOTENCY_HEADER: Final = "idempotency-key"
IDEMPOTENCY_META: Final = "dev.tether/idempotencyKey"
#: The same key as Harvest's MCP Tasks route names it, honoured for clients written for it.
HARVEST_IDEMPOTENCY_META: Final = "io.autumn-harvest/idempotencyKey"
_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")
_B64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


@dataclass(frozen=True)
class Route:
    """What the ladder learned: the era, the version, and the per-request capabilities."""

    era: Era
    version: str
    capabilities: dict[str, Any] = field(default_factory=dict)
    client_info: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def declares_tasks(self) -> bool:
        """The Tasks extension counts only on a 2026-07-28 request that declares it itself."""
        if self.era != "modern":
            return False
        extensions = self.capabilities.get("extensions")
        return isinstance(extensions, dict) and isinstance(
            extensions.get(codes.TASKS_EXTENSION), dict
        )

    def elicitation_modes(self) -> frozenset[str]:
        """Elicitation modes the request declared (`{}` means form only)."""
        elicitation = self.capabilities.get("elicitation")
        if not isinstance(elicitation, dict):
            return frozenset()
        modes = {m for m in ("form", "url") if m in elicitation}
        return frozenset(modes or {"form"})


def decode_header_value(raw: str, header: str) -> str:
    """Trim, then decode the `=?base64?…?=` sentinel (markers case-sensitive). Raises
    HeaderMismatch for bad Base64 or characters not allowed in a header value."""
    value = raw.strip(" \t")
    if value.startswith(codes.BASE64_PREFIX) and value.endswith(codes.BASE64_SUFFIX):
        encoded = value[len(codes.BASE64_PREFIX) : -len(codes.BASE64_SUFFIX)]
        if len(encoded) % 4 or not _B64.match(encoded):
            raise HeaderMismatch(f"{header} holds invalid Base64")
        try:
            return base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise HeaderMismatch(f"{header} holds invalid Base64") from None
    if _UNSAFE.search(value):
        raise HeaderMismatch(f"{header} contains characters not allowed in a header value")
    return value


def _meta_of(msg: Message) -> dict[str, Any] | None:
    params = msg.params
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    return meta if isinstance(meta, dict) else None


def is_legacy(msg: Message, headers: Mapping[str, str]) -> bool:
    """An `initialize`-era request: no 2026 version in `_meta`, and either an `initialize`
    (or its notification) without a 2026 header, or a legacy version header."""
    meta = _meta_of(msg)
    if meta is not None and codes.META_PROTOCOL_VERSION in meta:
        return False
    header = headers.get(codes.H_PROTOCOL_VERSION, "").strip()
    if header in codes.LEGACY_VERSIONS:
        return True
    return not header and msg.method in ("initialize", "notifications/initialized")


def check(
    msg: Message, headers: Mapping[str, str], param_schema: ParamSchema | None = None
) -> Route:
    """Run the ladder (`param_schema`: the tools whose arguments Mcp-Param-* headers mirror).
    Raises HeaderMismatch, UnsupportedProtocolVersion or InvalidMeta."""
    if is_legacy(msg, headers):
        return _legacy(msg, headers)
    return _modern(msg, headers, param_schema)


def _legacy(msg: Message, headers: Mapping[str, str]) -> Route:
    header = headers.get(codes.H_PROTOCOL_VERSION, "").strip()
    version = header
    if msg.method == "initialize" and isinstance(msg.params, dict):
        requested = msg.params.get("protocolVersion")
        version = requested if requested in codes.LEGACY_VERSIONS else codes.LEGACY_VERSIONS[0]
    caps: dict[str, Any] = {}
    if isinstance(msg.params, dict) and isinstance(msg.params.get("capabilities"), dict):
        caps = msg.params["capabilities"]
    return Route("legacy", version or codes.LEGACY_VERSIONS[0], caps)


def _modern(msg: Message, headers: Mapping[str, str], param_schema: ParamSchema | None) -> Route:
    header = headers.get(codes.H_PROTOCOL_VERSION)
    if header is None or not header.strip():
        raise HeaderMismatch("MCP-Protocol-Version header is required")
    header = header.strip()
    meta = _meta_of(msg)
    meta_version = meta.get(codes.META_PROTOCOL_VERSION) if meta is not None else None
    if isinstance(meta_version, str) and meta_version != header:
        raise HeaderMismatch(
            f"MCP-Protocol-Version header {header!r} differs from _meta protocolVersion "
            f"{meta_version!r}"
        )
    if header != codes.MODERN_VERSION:
        raise UnsupportedProtocolVersion(header, [codes.MODERN_VERSION])
    if msg.is_notification and meta is None:
        _check_method(msg, headers)  # `_meta` is required on requests, not on notifications
        return Route("modern", header)
    if meta is None:
        raise InvalidMeta("params._meta is required")
    if not isinstance(meta_version, str):
        raise InvalidMeta(f"_meta is missing {codes.META_PROTOCOL_VERSION}")
    caps = meta.get(codes.META_CLIENT_CAPABILITIES)
    if not isinstance(caps, dict):
        raise InvalidMeta(f"_meta is missing {codes.META_CLIENT_CAPABILITIES} (an object)")
    client_info = meta.get(codes.META_CLIENT_INFO)
    _check_method(msg, headers)
    _check_name(msg, headers)
    if param_schema is not None and msg.method == "tools/call":
        _check_tool_params(msg.params, headers, param_schema)
    return Route(
        "modern",
        header,
        caps,
        client_info if isinstance(client_info, dict) else None,
        meta,
    )


def _check_method(msg: Message, headers: Mapping[str, str]) -> None:
    raw = headers.get(codes.H_METHOD)
    if raw is None:
        if msg.is_notification:
            return  # header rules for notification POSTs are not defined by this revision
        raise HeaderMismatch("Mcp-Method header is required")
    if decode_header_value(raw, "Mcp-Method") != msg.method:
        raise HeaderMismatch(f"Mcp-Method header does not match method {msg.method!r}")


def _check_name(msg: Message, headers: Mapping[str, str]) -> None:
    field_name = codes.NAME_FIELDS.get(msg.method)
    if field_name is None:
        return  # Mcp-Name on other methods has nothing to mirror: ignored
    raw = headers.get(codes.H_NAME)
    if raw is None:
        if msg.method in codes.NAME_OPTIONAL:
            return
        raise HeaderMismatch(f"Mcp-Name header is required for {msg.method}")
    value = decode_header_value(raw, "Mcp-Name")
    body = msg.params.get(field_name) if isinstance(msg.params, dict) else None
    if body is None:
        return  # the params check reports the missing field (-32602)
    if value != body:
        raise HeaderMismatch(f"Mcp-Name header does not match params.{field_name}")


def _check_tool_params(params: Any, headers: Mapping[str, str], param_schema: ParamSchema) -> None:
    """Mcp-Param-* of a tools/call to a known tool with an arguments object (anything else is
    left to the params check, which reports it as -32602)."""
    name = params.get("name") if isinstance(params, dict) else None
    schema = param_schema(name) if isinstance(name, str) else None
    if schema is None:
        return
    args = params.get("arguments")
    if args is None:
        args = {}
    if isinstance(args, dict):
        check_param_headers(schema, args, headers)


def check_param_headers(
    schema: Mapping[str, Any], args: Mapping[str, Any], headers: Mapping[str, str]
) -> None:
    """SEP-2243 `Mcp-Param-{Name}`: an argument whose schema names an `x-mcp-header` must be
    mirrored by that header (decoded, then compared by type). Raises HeaderMismatch."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return
    for arg, prop in props.items():
        header_name = prop.get("x-mcp-header") if isinstance(prop, dict) else None
        if not isinstance(header_name, str):
            continue
        raw = headers.get(codes.H_PARAM_PREFIX + header_name.lower())
        value = args.get(arg)
        if value is None:
            if raw is not None:
                raise HeaderMismatch(f"Mcp-Param-{header_name} sent without argument {arg!r}")
            continue
        if raw is None:
            raise HeaderMismatch(f"Mcp-Param-{header_name} header is required")
        if not _same(decode_header_value(raw, f"Mcp-Param-{header_name}"), value):
            raise HeaderMismatch(f"Mcp-Param-{header_name} does not match argument {arg!r}")


def _same(header: str, value: Any) -> bool:
    if isinstance(value, bool):
        return header == ("true" if value else "false")
    if isinstance(value, int | float):
        try:
            return float(header) == float(value)
        except ValueError:
            return False
    if isinstance(value, str):
        return header == value
    return False


# --- transport headers ------------------------------------------------------------------------


def is_json(headers: Mapping[str, str]) -> bool:
    """The body is declared application/json (parameters such as charset aside)."""
    return headers.get("content-type", "").split(";")[0].strip().lower() == JSON


def declared_length_over(headers: Mapping[str, str], limit: int) -> bool:
    """A Content-Length that already says the body is too large."""
    declared = headers.get("content-length")
    return declared is not None and declared.isdigit() and int(declared) > limit


def accepts_sse(headers: Mapping[str, str]) -> bool:
    """The client takes a text/event-stream reply."""
    return SSE in headers.get("accept", "")


def idempotency_key(params: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """The Idempotency-Key header (trimmed, if not blank), else `_meta`'s
    dev.tether/idempotencyKey, else its io.autumn-harvest/idempotencyKey, else None.

    Raises:
        InvalidParams: the `_meta` key the header does not override is not a non-empty
            string (a retry would otherwise start a second run).
    """
    header = headers.get(IDEMPOTENCY_HEADER)
    if header and header.strip():
        return header.strip()
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        return None
    for name in (IDEMPOTENCY_META, HARVEST_IDEMPOTENCY_META):
        if name in meta:
            key = meta[name]
            if not isinstance(key, str) or not key:
                raise InvalidParams(f"_meta {name} must be a non-empty string", {"key": name})
            return key
    return None
