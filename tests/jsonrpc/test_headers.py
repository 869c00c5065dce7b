"""The header ladder `tether.jsonrpc.headers.check` (pure): era detection, the version header,
required `_meta`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*` and the Base64 sentinel, and the
other request-header rules (media type, SSE, Idempotency-Key). Spec: MCP 2026-07-28
transports/streamable-http and SEP-2243, ext-tasks routing headers; the
missing-`Mcp-Name`-on-`tasks/*` leniency is our choice (CHECKLIST item 42)."""

from __future__ import annotations

import base64
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.jsonrpc import codes
from tether.jsonrpc.codec import Message
from tether.jsonrpc.errors import (
    HeaderMismatch,
    InvalidMeta,
    InvalidParams,
    JsonRpcError,
    UnsupportedProtocolVersion,
)
from tether.jsonrpc.headers import (
    HARVEST_IDEMPOTENCY_META,
    IDEMPOTENCY_HEADER,
    IDEMPOTENCY_META,
    Route,
    accepts_sse,
    check,
    declared_length_over,
    decode_header_value,
    idempotency_key,
    is_json,
    is_legacy,
)

V = codes.MODERN_VERSION
TASKS_CAPS: dict[str, Any] = {"elicitation": {}, "extensions": {codes.TASKS_EXTENSION: {}}}
_MISSING: Any = object()

# Header-safe text as a server would meet it after HTTP parsing: no control characters and
# no surrogates (those cannot be UTF-8 encoded).
_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
unicode_names = st.text(
    alphabet=st.characters(exclude_categories=_SURROGATES), min_size=1, max_size=60
)


def meta(
    version: Any = V, caps: Any = _MISSING, **extra: Any
) -> dict[str, Any]:  # a valid _meta by default
    out: dict[str, Any] = {}
    if version is not _MISSING:
        out[codes.META_PROTOCOL_VERSION] = version
    out[codes.META_CLIENT_CAPABILITIES] = {} if caps is _MISSING else caps
    out.update(extra)
    return out


def request(method: str, params: Any = _MISSING, *, request_id: int | None = 1) -> Message:
    """A request whose params default to `{"_meta": meta()}`; `params=None` sends null."""
    if params is _MISSING:
        return Message(method, {"_meta": meta()}, request_id, True)
    return Message(method, params, request_id, True)


def headers(method: str | None, name: str | None = None, **extra: str) -> dict[str, str]:
    """Lower-cased header names, as the endpoint hands them to the ladder."""
    h = {codes.H_PROTOCOL_VERSION: V}
    if method is not None:
        h[codes.H_METHOD] = method
    if name is not None:
        h[codes.H_NAME] = name
    h.update({k.lower(): v for k, v in extra.items()})
    return h


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def refused(msg: Message, hdrs: dict[str, str]) -> JsonRpcError:
    with pytest.raises(JsonRpcError) as caught:
        check(msg, hdrs)
    return caught.value


# --- a well-formed modern request ---------------------------------------------------------------


def test_a_well_formed_request_yields_a_modern_route_with_its_capabilities() -> None:
    """The route carries the era, the version, the request's own capabilities and clientInfo."""
    info = {"name": "c", "version": "1"}
    msg = request("tools/list", {"_meta": meta(caps=TASKS_CAPS, **{codes.META_CLIENT_INFO: info})})
    route = check(msg, headers("tools/list"))
    assert (route.era, route.version, route.capabilities) == ("modern", V, TASKS_CAPS)
    assert route.client_info == info
    assert route.declares_tasks()


def test_client_info_is_not_required() -> None:
    """`_meta` without clientInfo is served (checklist 24)."""
    route = check(request("server/discover"), headers("server/discover"))
    assert route.client_info is None


# --- version handling (transport: server validation) ----------------------------------------------


@pytest.mark.parametrize("value", [None, "", "   "])
def test_a_missing_or_blank_version_header_is_a_header_mismatch(value: str | None) -> None:
    """A modern-only request without `MCP-Protocol-Version` → -32020 (checklist 15)."""
    h = headers("server/discover")
    if value is None:
        del h[codes.H_PROTOCOL_VERSION]
    else:
        h[codes.H_PROTOCOL_VERSION] = value
    assert isinstance(refused(request("server/discover"), h), HeaderMismatch)


def test_a_version_header_that_differs_from_meta_is_a_header_mismatch() -> None:
    """Header 2026-07-28, `_meta` 2099-01-01 → -32020 (checklist 16)."""
    msg = request("server/discover", {"_meta": meta("2099-01-01")})
    assert isinstance(refused(msg, headers("server/discover")), HeaderMismatch)


def test_the_mismatch_is_reported_before_an_unsupported_version() -> None:
    """Header 1900-01-01 and `_meta` 2026-07-28 differ: -32020 comes first (the ladder's order)."""
    h = headers("server/discover")
    h[codes.H_PROTOCOL_VERSION] = "1900-01-01"
    assert isinstance(refused(request("server/discover"), h), HeaderMismatch)


@pytest.mark.parametrize("version", ["1900-01-01", "2025-11-25", "2025-06-18", "2099-01-01"])
def test_an_unserved_version_named_in_both_places_is_unsupported(version: str) -> None:
    """Header and `_meta` agree on a version not served under the 2026 envelope → -32022 with
    `data.supported` (non-empty, holding 2026-07-28) and `data.requested` (checklist 17, 19)."""
    msg = request("server/discover", {"_meta": meta(version)})
    h = headers("server/discover")
    h[codes.H_PROTOCOL_VERSION] = version
    exc = refused(msg, h)
    assert isinstance(exc, UnsupportedProtocolVersion)
    assert exc.code == codes.UNSUPPORTED_PROTOCOL_VERSION
    assert exc.data["requested"] == version
    assert codes.MODERN_VERSION in exc.data["supported"]
    assert all(isinstance(v, str) for v in exc.data["supported"])
    assert version not in exc.data["supported"]


def test_an_unserved_header_version_without_meta_is_unsupported() -> None:
    """With no `_meta` version to compare, an unknown header version → -32022."""
    h = headers("server/discover")
    h[codes.H_PROTOCOL_VERSION] = "1900-01-01"
    exc = refused(request("server/discover", {"_meta": meta(_MISSING)}), h)
    assert isinstance(exc, UnsupportedProtocolVersion)


def test_the_version_header_value_is_trimmed() -> None:
    """Optional whitespace around a header value is not part of it (RFC 9110)."""
    h = headers("server/discover")
    h[codes.H_PROTOCOL_VERSION] = f"  {V}\t"
    assert check(request("server/discover"), h).version == V


# --- required _meta -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        pytest.param(None, id="params-null"),
        pytest.param({}, id="no-meta"),
        pytest.param({"_meta": "x"}, id="meta-not-object"),
        pytest.param({"_meta": meta(_MISSING)}, id="no-protocolVersion"),
        pytest.param({"_meta": meta(20260728)}, id="protocolVersion-not-string"),
        pytest.param({"_meta": {codes.META_PROTOCOL_VERSION: V}}, id="no-clientCapabilities"),
        pytest.param({"_meta": meta(caps="x")}, id="clientCapabilities-string"),
        pytest.param({"_meta": meta(caps=[])}, id="clientCapabilities-array"),
        pytest.param({"_meta": meta(caps=None)}, id="clientCapabilities-null"),
        pytest.param([1, 2], id="params-array"),
    ],
)
def test_a_missing_or_malformed_required_meta_key_is_invalid_meta(params: Any) -> None:
    """Missing params, `_meta`, protocolVersion or clientCapabilities (or the wrong type)
    → -32602 sent with HTTP 400 (checklist 20-23, 25)."""
    exc = refused(request("server/discover", params), headers("server/discover"))
    assert isinstance(exc, InvalidMeta)
    assert isinstance(exc, InvalidParams)
    assert (exc.code, exc.http_status) == (codes.INVALID_PARAMS, 400)


def test_the_meta_check_runs_before_the_method_header_check() -> None:
    """The ladder's order: a missing `_meta` key is reported before a missing `Mcp-Method`."""
    exc = refused(request("tools/list", {}), headers(None))
    assert isinstance(exc, InvalidMeta)


# --- Mcp-Method (transport: standard request headers) ---------------------------------------------


def test_a_request_without_mcp_method_is_a_header_mismatch() -> None:
    """`Mcp-Method` is required on every request (checklist 27)."""
    assert isinstance(refused(request("tools/list"), headers(None)), HeaderMismatch)


@pytest.mark.parametrize("value", ["server/discover", "TOOLS/LIST", "tools/list/", "tools"])
def test_an_mcp_method_that_differs_from_the_body_is_a_header_mismatch(value: str) -> None:
    """Values compare exactly and case-sensitively (checklist 28, 29)."""
    assert isinstance(refused(request("tools/list"), headers(value)), HeaderMismatch)


def test_the_mcp_method_value_is_trimmed() -> None:
    """Surrounding whitespace is not part of the value."""
    assert check(request("tools/list"), headers(" tools/list  ")).era == "modern"


def test_a_notification_may_omit_mcp_method() -> None:
    """Header rules for notification POSTs are not defined by 2026-07-28; they pass."""
    msg = request("notifications/cancelled", {"_meta": meta()}, request_id=None)
    assert check(msg, headers(None)).era == "modern"


# --- Mcp-Name (transport: standard request headers) -----------------------------------------------

NAMED = [
    ("tools/call", "name", "sync_tool"),
    ("prompts/get", "name", "greeting"),
    ("resources/read", "uri", "fixture://hello"),
    ("tasks/get", "taskId", "ex_abc"),
    ("tasks/update", "taskId", "ex_abc"),
    ("tasks/cancel", "taskId", "ex_abc"),
]


def named(method: str, field: str, value: Any) -> Message:
    return request(method, {field: value, "_meta": meta(caps=TASKS_CAPS)})


@pytest.mark.parametrize(("method", "field", "value"), NAMED)
def test_a_matching_mcp_name_is_accepted(method: str, field: str, value: str) -> None:
    """`Mcp-Name` equal to the body's name / uri / taskId passes (checklist 38)."""
    assert check(named(method, field, value), headers(method, value)).era == "modern"


@pytest.mark.parametrize(("method", "field", "value"), NAMED)
def test_a_differing_mcp_name_is_a_header_mismatch(method: str, field: str, value: str) -> None:
    """Every method that mirrors a body field refuses a different `Mcp-Name` (checklist 32,
    39-41)."""
    exc = refused(named(method, field, value), headers(method, "other"))
    assert isinstance(exc, HeaderMismatch)


@pytest.mark.parametrize(
    ("method", "field", "value"), [n for n in NAMED if not n[0].startswith("tasks/")]
)
def test_a_missing_mcp_name_is_a_header_mismatch_for_core_methods(
    method: str, field: str, value: str
) -> None:
    """tools/call, prompts/get and resources/read require `Mcp-Name` (checklist 31)."""
    assert isinstance(refused(named(method, field, value), headers(method)), HeaderMismatch)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_a_missing_mcp_name_is_tolerated_on_tasks_methods(method: str) -> None:
    """Our choice for interop: widely used clients omit it on tasks/* (checklist 42)."""
    assert check(named(method, "taskId", "ex_abc"), headers(method)).era == "modern"


def test_mcp_name_is_case_sensitive() -> None:
    """`SYNC_TOOL` does not name `sync_tool`."""
    exc = refused(named("tools/call", "name", "sync_tool"), headers("tools/call", "SYNC_TOOL"))
    assert isinstance(exc, HeaderMismatch)


def test_mcp_name_on_a_method_without_a_name_is_ignored() -> None:
    """Nothing to mirror on tools/list: a stray `Mcp-Name` is ignored (the spec is silent)."""
    assert check(request("tools/list"), headers("tools/list", "=?base64?!!?=")).era == "modern"


def test_mcp_name_without_the_body_field_is_left_to_the_params_check() -> None:
    """No `params.taskId` to compare: the ladder passes it on; the params check answers
    -32602 (checklist 108)."""
    msg = request("tasks/get", {"_meta": meta(caps=TASKS_CAPS)})
    assert check(msg, headers("tasks/get", "ex_abc")).era == "modern"


def test_the_method_header_is_checked_before_the_name_header() -> None:
    """A tasks/get body sent as `Mcp-Method: tasks/cancel` is refused on the method, whatever
    the name (checklist 43)."""
    msg = named("tasks/get", "taskId", "ex_abc")
    assert isinstance(refused(msg, headers("tasks/cancel", "ex_abc")), HeaderMismatch)


# --- the Base64 sentinel (transport: value encoding) ----------------------------------------------


def test_a_base64_encoded_name_is_decoded_before_comparing() -> None:
    """`=?base64?c3luY190b29s?=` names `sync_tool` (checklist 33)."""
    msg = named("tools/call", "name", "sync_tool")
    assert check(msg, headers("tools/call", b64("sync_tool"))).era == "modern"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("=?base64?SGVsbG8?=", id="bad-padding"),
        pytest.param("=?base64?SGVs!!!bG8=?=", id="invalid-alphabet"),
        pytest.param("=?base64?SGVsbG8=\n?=", id="newline-inside"),
        pytest.param("=?base64?SGVs bG8=?=", id="space-inside"),
        pytest.param("=?base64?SGVsbG8===?=", id="too-much-padding"),
        pytest.param("=?base64?SGV=sbG8?=", id="padding-in-the-middle"),
        pytest.param("=?base64?" + base64.b64encode(b"\xff\xfe").decode() + "?=", id="not-utf8"),
    ],
)
def test_an_undecodable_sentinel_is_a_header_mismatch(value: str) -> None:
    """Bad padding, characters outside the alphabet, or bytes that are not UTF-8 → -32020
    (checklist 34, 35)."""
    exc = refused(named("tools/call", "name", "Hello"), headers("tools/call", value))
    assert isinstance(exc, HeaderMismatch)


def test_an_uppercase_marker_is_taken_literally() -> None:
    """`=?BASE64?…?=` is not the sentinel, so it mismatches `sync_tool` (checklist 36) and
    matches a body that literally holds it."""
    literal = "=?BASE64?c3luY190b29s?="
    exc = refused(named("tools/call", "name", "sync_tool"), headers("tools/call", literal))
    assert isinstance(exc, HeaderMismatch)
    assert isinstance(
        check(named("tools/call", "name", literal), headers("tools/call", literal)), Route
    )


@pytest.mark.parametrize("literal", ["=?base64?c3luY190b29s", "c3luY190b29s?=", "?base64?x?="])
def test_a_half_sentinel_is_taken_literally(literal: str) -> None:
    """A missing prefix or suffix means no encoding."""
    assert decode_header_value(literal, "Mcp-Name") == literal


def test_a_plain_value_that_looks_like_a_sentinel_travels_encoded() -> None:
    """A name that itself starts with `=?base64?` and ends with `?=` must be encoded by the
    client; the server decodes it back to the literal name."""
    name = "=?base64?abc?="
    assert isinstance(
        check(named("tools/call", "name", name), headers("tools/call", b64(name))), Route
    )


@pytest.mark.parametrize("raw", ["  sync_tool  ", "\tsync_tool", "sync_tool \t"])
def test_surrounding_whitespace_is_trimmed(raw: str) -> None:
    """`Mcp-Name:   sync_tool  ` names `sync_tool` (checklist 37)."""
    assert isinstance(
        check(named("tools/call", "name", "sync_tool"), headers("tools/call", raw)), Route
    )


@pytest.mark.parametrize("raw", ["a\x00b", "a\x7fb", "a\x1bb", "a\nb"])
def test_control_characters_in_a_plain_value_are_a_header_mismatch(raw: str) -> None:
    """A header value with characters HTTP forbids is a validation failure."""
    with pytest.raises(HeaderMismatch):
        decode_header_value(raw, "Mcp-Name")


@given(unicode_names)
def test_any_unicode_name_round_trips_through_the_sentinel(name: str) -> None:
    """Base64 of any UTF-8 name decodes to the same name, and the ladder accepts the call."""
    assert decode_header_value(b64(name), "Mcp-Name") == name
    assert isinstance(
        check(named("tools/call", "name", name), headers("tools/call", b64(name))), Route
    )


@given(unicode_names, unicode_names)
def test_an_encoded_name_never_matches_a_different_body(header_name: str, body_name: str) -> None:
    """Decoding never makes two different names equal."""
    msg = named("tools/call", "name", body_name)
    if header_name == body_name:
        assert isinstance(check(msg, headers("tools/call", b64(header_name))), Route)
    else:
        with pytest.raises(HeaderMismatch):
            check(msg, headers("tools/call", b64(header_name)))


@given(st.text(max_size=60))
def test_decoding_any_header_text_returns_text_or_header_mismatch(raw: str) -> None:
    """decode_header_value never raises anything but HeaderMismatch."""
    try:
        value = decode_header_value(raw, "Mcp-Name")
    except HeaderMismatch:
        return
    assert isinstance(value, str)


@given(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=!?"))
def test_decoding_base64ish_sentinels_returns_text_or_header_mismatch(inner: str) -> None:
    """Near-Base64 payloads inside the sentinel decode or are refused, never crash."""
    try:
        value = decode_header_value(f"=?base64?{inner}?=", "Mcp-Name")
    except HeaderMismatch:
        return
    assert base64.b64encode(value.encode()).decode() == inner


# --- era detection (before any other rule) --------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_an_initialize_without_2026_markers_is_legacy_at_its_version(version: str) -> None:
    """`initialize` with no 2026 header and no `_meta` version is answered the legacy way, at
    the version it asked for (checklist 47)."""
    msg = request(
        "initialize",
        {"protocolVersion": version, "capabilities": {"roots": {}}, "clientInfo": {}},
    )
    assert is_legacy(msg, {})
    route = check(msg, {})
    assert (route.era, route.version, route.capabilities) == ("legacy", version, {"roots": {}})


def test_a_legacy_initialize_asking_an_unknown_version_gets_the_newest_legacy_one() -> None:
    """Version negotiation: an unknown requested version is answered with the latest legacy
    revision the server speaks."""
    msg = request("initialize", {"protocolVersion": "2024-11-05", "capabilities": {}})
    assert check(msg, {}).version == codes.LEGACY_VERSIONS[0]


def test_the_initialized_notification_without_a_header_is_legacy() -> None:
    """The handshake's notification travels before any version header."""
    msg = request("notifications/initialized", {}, request_id=None)
    assert check(msg, {}).era == "legacy"


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_a_legacy_version_header_without_2026_meta_is_legacy_and_needs_no_mcp_method(
    version: str,
) -> None:
    """After a legacy `initialize`, requests carry only the version header."""
    msg = request("tools/call", {"name": "sync_tool", "arguments": {}})
    route = check(msg, {codes.H_PROTOCOL_VERSION: version})
    assert (route.era, route.version) == ("legacy", version)


def test_an_initialize_with_the_2026_envelope_is_modern() -> None:
    """A 2026-style `initialize` takes the modern ladder (and the router answers -32601)."""
    assert check(request("initialize"), headers("initialize")).era == "modern"
    assert not is_legacy(request("initialize"), {})


def test_a_legacy_header_with_a_2026_meta_version_is_modern_and_mismatched() -> None:
    """`_meta` names 2026-07-28, so the request is modern; its header then differs → -32020."""
    h = headers("tools/list")
    h[codes.H_PROTOCOL_VERSION] = "2025-11-25"
    assert not is_legacy(request("tools/list"), h)
    assert isinstance(refused(request("tools/list"), h), HeaderMismatch)


def test_a_request_with_no_version_anywhere_is_not_legacy() -> None:
    """Without a header or `initialize`, a request is modern and refused for the missing
    header (pre-2025-06-18 clients are not served)."""
    msg = request("tools/list", {"_meta": meta(_MISSING)})
    assert not is_legacy(msg, {})
    assert isinstance(refused(msg, {codes.H_METHOD: "tools/list"}), HeaderMismatch)


# --- what the route tells the handlers ------------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "declares"),
    [
        (TASKS_CAPS, True),
        ({"extensions": {codes.TASKS_EXTENSION: {}}}, True),
        ({}, False),
        ({"tasks": {"requests": {"tools": {"call": {}}}}}, False),  # legacy capability only
        ({"extensions": {codes.TASKS_EXTENSION: True}}, False),
        ({"extensions": ["io.modelcontextprotocol/tasks"]}, False),
        ({"extensions": {"io.example/other": {}}}, False),
    ],
)
def test_only_the_tasks_extension_object_declares_tasks(
    caps: dict[str, Any], declares: bool
) -> None:
    """The extension counts only as `extensions["io.modelcontextprotocol/tasks"]` = an object;
    a legacy `tasks` capability does not count (checklist 74)."""
    assert Route("modern", V, caps).declares_tasks() is declares


def test_a_legacy_route_never_declares_tasks() -> None:
    """Under a legacy version the extension does not exist (checklist 79)."""
    assert not Route("legacy", "2025-11-25", TASKS_CAPS).declares_tasks()


@pytest.mark.parametrize(
    ("elicitation", "modes"),
    [
        (_MISSING, frozenset()),
        ({}, frozenset({"form"})),
        ({"form": {}}, frozenset({"form"})),
        ({"url": {}}, frozenset({"url"})),
        ({"form": {}, "url": {}}, frozenset({"form", "url"})),
        ("yes", frozenset()),
    ],
)
def test_elicitation_modes_follow_the_declaration(elicitation: Any, modes: frozenset[str]) -> None:
    """`{}` means form only; absent means none (MCP client/elicitation)."""
    caps = {} if elicitation is _MISSING else {"elicitation": elicitation}
    assert Route("modern", V, caps).elicitation_modes() == modes


# --- SEP-2243 Mcp-Param-* (tools/call) ---------------------------------------------------

REGION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "note": {"type": "string"},
    },
}


def region_tool(name: str) -> dict[str, Any] | None:
    return REGION_SCHEMA if name == "regional" else None


def call(arguments: Any, name: str = "regional") -> Message:
    return request("tools/call", {"name": name, "arguments": arguments, "_meta": meta()})


def call_headers(**params: str) -> dict[str, str]:
    return headers("tools/call", "regional", **{f"mcp-param-{k}": v for k, v in params.items()})


def test_mcp_param_headers_that_mirror_the_arguments_pass() -> None:
    """SEP-2243: each `x-mcp-header` argument is mirrored (Base64 sentinel decoded, numbers
    compared as numbers); arguments without `x-mcp-header` need no header."""
    args = {"region": "eu-west-1", "count": 3, "note": "n"}
    for hdrs in (
        call_headers(region="eu-west-1", count="3"),
        call_headers(region=b64("eu-west-1"), count="3.0"),
    ):
        assert check(call(args), hdrs, region_tool).era == "modern"


@pytest.mark.parametrize(
    ("arguments", "params"),
    [
        pytest.param({"region": "eu-west-1", "count": 3}, {"count": "3"}, id="missing-header"),
        pytest.param({"count": 3}, {"region": "eu-west-1", "count": "3"}, id="header-no-arg"),
        pytest.param(
            {"region": "eu-west-1", "count": 3}, {"region": "us", "count": "3"}, id="differs"
        ),
        pytest.param(
            {"region": "eu-west-1", "count": 3}, {"region": "eu-west-1", "count": "x"}, id="nan"
        ),
        pytest.param(
            {"region": "eu", "count": 3}, {"region": "=?base64?ZXU?==", "count": "3"}, id="bad-b64"
        ),
    ],
)
def test_a_missing_or_different_mcp_param_header_is_a_header_mismatch(
    arguments: dict[str, Any], params: dict[str, str]
) -> None:
    """SEP-2243 (checklist 44, 45): -32020, HTTP 400."""
    exc = refused_with(call(arguments), call_headers(**params), region_tool)
    assert isinstance(exc, HeaderMismatch)
    assert exc.http_status == 400


def test_mcp_param_rules_skip_unknown_tools_bad_arguments_and_other_eras() -> None:
    """Nothing to mirror for an unknown tool; arguments that are not an object are left to the
    params check (-32602); a 2025 request has no Mcp-Param rules; without a schema lookup the
    ladder checks no Mcp-Param header."""
    none: dict[str, str] = {}
    passed = [
        check(call({"region": "x"}, name="other"), headers("tools/call", "other"), region_tool),
        check(call([1]), call_headers(**none), region_tool),
        check(call({"region": "x"}), call_headers(**none)),
    ]
    assert [r.era for r in passed] == ["modern"] * 3
    legacy = {codes.H_PROTOCOL_VERSION: codes.LEGACY_VERSIONS[0]}
    msg = Message("tools/call", {"name": "regional", "arguments": {"region": "x"}}, 1, True)
    assert check(msg, legacy, region_tool).era == "legacy"


def refused_with(msg: Message, hdrs: dict[str, str], schema: Any) -> JsonRpcError:
    with pytest.raises(JsonRpcError) as info:
        check(msg, hdrs, schema)
    return info.value


# --- transport headers and the Idempotency-Key ---------------------------------------------


def test_the_idempotency_key_header_wins_over_meta() -> None:
    """Our choice: a non-blank Idempotency-Key header (trimmed), else `_meta`'s key (ours,
    else Harvest's name for it, from Harvest's crash-safe create)."""
    with_meta = {"_meta": {IDEMPOTENCY_META: "from-meta", HARVEST_IDEMPOTENCY_META: "h"}}
    assert idempotency_key(with_meta, {IDEMPOTENCY_HEADER: " k-1 "}) == "k-1"
    assert idempotency_key(with_meta, {IDEMPOTENCY_HEADER: "  "}) == "from-meta"
    assert idempotency_key({"_meta": {HARVEST_IDEMPOTENCY_META: "h"}}, {}) == "h"
    assert (
        idempotency_key({"_meta": {HARVEST_IDEMPOTENCY_META: 7}}, {"idempotency-key": "k"}) == "k"
    )
    assert idempotency_key({}, {}) is None


@pytest.mark.parametrize("name", [IDEMPOTENCY_META, HARVEST_IDEMPOTENCY_META])
@pytest.mark.parametrize("value", ["", 7, None, ["k"]])
def test_a_meta_idempotency_key_that_is_not_a_string_is_refused(name: str, value: Any) -> None:
    """Harvest's rule (the key must be a string): a key a retry could not repeat is refused with
    -32602, never dropped (dropping it would start a second run on the retry)."""
    with pytest.raises(InvalidParams) as info:
        idempotency_key({"_meta": {name: value}}, {})
    assert info.value.code == codes.INVALID_PARAMS and name in info.value.message


def test_transport_header_rules() -> None:
    """Only application/json bodies (any parameters); a declared oversize length; SSE only
    when the client accepts it."""
    assert is_json({"content-type": "Application/JSON; charset=utf-8"})
    assert not is_json({"content-type": "text/plain"}) and not is_json({})
    assert declared_length_over({"content-length": "11"}, 10)
    assert not declared_length_over({"content-length": "10"}, 10)
    assert not declared_length_over({"content-length": "-1"}, 10)
    assert accepts_sse({"accept": "application/json, text/event-stream"})
    assert not accepts_sse({"accept": "application/json"})
