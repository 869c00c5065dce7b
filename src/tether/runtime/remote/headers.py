"""The routing headers a request to a remote carries besides its body (PURE): how a value
travels in a header (`header_value`: as is when plain, else the Base64 sentinel), and the
`Mcp-Param-{Name}` headers a `tools/call` mirrors its arguments into (`param_headers`: each
argument whose input-schema property names an `x-mcp-header`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any, Final

from tether.runtime.remote import spec

_UNSAFE_HEADER: Final = re.compile(r"[^\x20-\x7e]")
#: What an HTTP header name may hold (RFC 9110 `token`): a name outside it cannot be sent.
_TOKEN: Final = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z\-]{1,128}$")


def header_value(value: str) -> str:
    """`value` as an `Mcp-Name` or `Mcp-Param-*` header carries it: as is when plain, else the
    Base64 sentinel (non-ASCII or control characters, surrounding blanks, or a value shaped
    like one)."""
    plain = (
        not _UNSAFE_HEADER.search(value)
        and value == value.strip(" \t")
        and not (value.startswith(spec.BASE64_PREFIX) and value.endswith(spec.BASE64_SUFFIX))
    )
    if plain:
        return value
    encoded = base64.b64encode(value.encode("utf-8")).decode("ascii")
    return f"{spec.BASE64_PREFIX}{encoded}{spec.BASE64_SUFFIX}"


def _text(value: Any) -> str | None:
    """An argument's value as its header's text (strings as they are, integers in decimal,
    booleans `true`/`false`); None for a value no header can mirror (null, an object, a list)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return value
    return None


def param_headers(schema: Mapping[str, Any] | None, arguments: Mapping[str, Any]) -> dict[str, str]:
    """The `Mcp-Param-{Name}` headers of a call with `arguments` to the tool whose input schema
    is `schema` (None: unknown, no headers): one for each argument whose property names an
    `x-mcp-header` and whose value is present and not null; none for the others."""
    props = schema.get("properties") if schema is not None else None
    if not isinstance(props, Mapping):
        return {}
    headers: dict[str, str] = {}
    for arg, prop in props.items():
        name = prop.get(spec.X_MCP_HEADER) if isinstance(prop, Mapping) else None
        if not isinstance(name, str) or not _TOKEN.match(f"{spec.H_PARAM_PREFIX}{name}"):
            continue
        text = _text(arguments.get(arg))
        if text is not None:
            headers[f"{spec.H_PARAM_PREFIX}{name.lower()}"] = header_value(text)
    return headers
