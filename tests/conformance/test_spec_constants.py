"""The harness's own copy of the spec constants agrees with Tether's (our rule: only the
black-box harness keeps its own copy, and this test checks that the two agree). This is the
only test that imports both."""

from __future__ import annotations

from tether.conformance import spec
from tether.jsonrpc import codes, headers


def test_error_codes_agree() -> None:
    """Spec (basic#error-codes): both copies name the same JSON-RPC and MCP codes."""
    pairs = [
        (spec.PARSE_ERROR, codes.PARSE_ERROR),
        (spec.INVALID_REQUEST, codes.INVALID_REQUEST),
        (spec.METHOD_NOT_FOUND, codes.METHOD_NOT_FOUND),
        (spec.INVALID_PARAMS, codes.INVALID_PARAMS),
        (spec.INTERNAL_ERROR, codes.INTERNAL_ERROR),
        (spec.HEADER_MISMATCH, codes.HEADER_MISMATCH),
        (spec.MISSING_REQUIRED_CLIENT_CAPABILITY, codes.MISSING_REQUIRED_CLIENT_CAPABILITY),
        (spec.UNSUPPORTED_PROTOCOL_VERSION, codes.UNSUPPORTED_PROTOCOL_VERSION),
    ]
    assert [a for a, b in pairs if a != b] == []


def test_http_statuses_agree_for_every_spec_code() -> None:
    """Spec (transports): the statuses the harness expects are the ones Tether sends."""
    assert {code: codes.HTTP_STATUS.get(code, 200) for code in spec.HTTP_STATUS} == dict(
        spec.HTTP_STATUS
    )


def test_tethers_own_codes_stay_outside_the_reserved_ranges() -> None:
    """Spec (basic#error-codes): application codes avoid -32768..-32000, so the harness's
    hygiene checks never flag them."""
    ours = {codes.UNAVAILABLE, codes.UNAUTHORIZED}
    assert all(not -32768 <= c <= -32000 for c in ours)
    assert not ours & spec.FORBIDDEN_CODES


def test_versions_headers_meta_keys_and_methods_agree() -> None:
    """Spec: versions, header names (case-insensitive), `_meta` keys, the extension id, the
    removed methods and the Mcp-Name fields are the same in both copies."""
    assert spec.VERSION == codes.MODERN_VERSION
    assert spec.LEGACY_VERSIONS == codes.LEGACY_VERSIONS
    headers = [
        (spec.H_PROTOCOL_VERSION, codes.H_PROTOCOL_VERSION),
        (spec.H_METHOD, codes.H_METHOD),
        (spec.H_NAME, codes.H_NAME),
        (spec.H_PARAM_PREFIX, codes.H_PARAM_PREFIX),
        (spec.H_SESSION_ID, codes.H_SESSION_ID),
    ]
    assert [(a, b) for a, b in headers if a.lower() != b.lower()] == []
    assert (spec.BASE64_PREFIX, spec.BASE64_SUFFIX) == (codes.BASE64_PREFIX, codes.BASE64_SUFFIX)
    meta = [
        (spec.META_PROTOCOL_VERSION, codes.META_PROTOCOL_VERSION),
        (spec.META_CLIENT_CAPABILITIES, codes.META_CLIENT_CAPABILITIES),
        (spec.META_CLIENT_INFO, codes.META_CLIENT_INFO),
        (spec.META_SERVER_INFO, codes.META_SERVER_INFO),
        (spec.META_SUBSCRIPTION_ID, codes.META_SUBSCRIPTION_ID),
        (spec.TASKS_EXTENSION, codes.TASKS_EXTENSION),
    ]
    assert [(a, b) for a, b in meta if a != b] == []
    assert spec.REMOVED_METHODS == codes.REMOVED_METHODS
    assert dict(spec.NAME_FIELDS) == dict(codes.NAME_FIELDS)


def test_media_types_task_statuses_and_listen_names_agree() -> None:
    """Spec (transports, ext-tasks): the media types, the statuses a task never leaves, and
    the listen method with its acknowledgement and task notification are the same in both
    copies."""
    assert (spec.JSON, spec.SSE) == (headers.JSON, headers.SSE)
    assert spec.TERMINAL == codes.TERMINAL_TASK_STATUSES
    assert spec.TERMINAL <= spec.TASK_STATUSES
    listen = (spec.LISTEN, spec.LISTEN_ACKNOWLEDGED, spec.TASK_NOTIFICATION)
    assert listen == (codes.LISTEN, codes.LISTEN_ACKNOWLEDGED, codes.TASK_NOTIFICATION)
