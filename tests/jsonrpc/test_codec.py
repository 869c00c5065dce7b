"""The JSON-RPC codec and error tree (pure): one message per body, no batches, no null ids, no
posted responses, ids keep their JSON type. Spec: MCP 2026-07-28 basic/index (messages) and
transports/streamable-http."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.jsonrpc import codec, codes
from tether.jsonrpc import errors as err

int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
json_scalars = st.none() | st.booleans() | int64 | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
request_ids = st.text(max_size=40) | int64


def body(**fields: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", **fields})


def decode_error(raw: bytes) -> codec.DecodeError:
    with pytest.raises(codec.DecodeError) as caught:
        codec.decode(raw)
    return caught.value


# --- what is accepted --------------------------------------------------------------------------


def test_a_request_decodes_to_method_params_and_id() -> None:
    """A request object keeps its method, raw params and id, and is not a notification."""
    msg = codec.decode(body(id=7, method="tools/list", params={"_meta": {}}))
    assert msg == codec.Message("tools/list", {"_meta": {}}, 7, True)
    assert not msg.is_notification


def test_a_body_without_id_is_a_notification() -> None:
    """No `id` member makes a notification (JSON-RPC 2.0 §4.1)."""
    msg = codec.decode(body(method="notifications/cancelled", params={"requestId": 1}))
    assert msg.is_notification
    assert msg.id is None


def test_absent_params_are_told_apart_from_null_params() -> None:
    """`has_params` records whether the member was there, so the ladder can tell omitted from
    null (checklist 20 needs omitted params refused)."""
    absent = codec.decode(body(id=1, method="server/discover"))
    null = codec.decode(body(id=1, method="server/discover", params=None))
    assert (absent.params, absent.has_params) == (None, False)
    assert (null.params, null.has_params) == (None, True)


@pytest.mark.parametrize("request_id", ["1", 1, "", "abc", 0, -5, 2**63 - 1])
def test_the_id_keeps_its_json_type(request_id: str | int) -> None:
    """A string id stays a string and a number stays a number (checklist 11)."""
    msg = codec.decode(body(id=request_id, method="x"))
    assert msg.id == request_id
    assert type(msg.id) is type(request_id)


@given(request_ids)
def test_ids_survive_a_round_trip_through_an_error_reply(request_id: str | int) -> None:
    """Whatever id a request carries, the error reply carries the same value and type."""
    msg = codec.decode(body(id=request_id, method="x"))
    reply = orjson.loads(codec.encode_error(msg.id, err.MethodNotFound()))
    assert reply["id"] == request_id
    assert type(reply["id"]) is type(request_id)


# --- what is refused ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw", [b"", b"not json", b"{", b'{"jsonrpc": "2.0",}', b"\xff\xfe", b"{'a': 1}"]
)
def test_a_body_that_is_not_json_is_a_parse_error_without_id(raw: bytes) -> None:
    """Unparseable bytes → -32700 and no id to answer under (checklist 6)."""
    exc = decode_error(raw)
    assert exc.error.code == codes.PARSE_ERROR
    assert exc.request_id is None


def test_a_batch_is_an_invalid_request() -> None:
    """A JSON array is a batch, which 2026-07-28 removed → -32600 (checklist 7)."""
    exc = decode_error(orjson.dumps([{"jsonrpc": "2.0", "id": 1, "method": "x"}]))
    assert exc.error.code == codes.INVALID_REQUEST
    assert exc.request_id is None


def test_an_empty_batch_is_an_invalid_request() -> None:
    """`[]` is refused like any other batch."""
    assert decode_error(b"[]").error.code == codes.INVALID_REQUEST


@pytest.mark.parametrize("raw", [b"1", b'"x"', b"null", b"true"])
def test_a_json_scalar_is_an_invalid_request(raw: bytes) -> None:
    """Only an object can be a request."""
    assert decode_error(raw).error.code == codes.INVALID_REQUEST


def test_a_null_id_is_an_invalid_request_answered_with_a_null_id() -> None:
    """`"id": null` is forbidden in MCP → -32600, answered without an id (checklist 8)."""
    exc = decode_error(body(id=None, method="server/discover"))
    assert exc.error.code == codes.INVALID_REQUEST
    assert exc.request_id is None


@pytest.mark.parametrize("bad_id", [True, False, 1.5, 1.0, [1], {"a": 1}])
def test_an_id_that_is_not_a_string_or_integer_is_an_invalid_request(bad_id: Any) -> None:
    """Booleans, fractions, arrays and objects are not ids."""
    exc = decode_error(body(id=bad_id, method="x"))
    assert exc.error.code == codes.INVALID_REQUEST
    assert exc.request_id is None


@pytest.mark.parametrize(
    "response", [{"id": 3, "result": {}}, {"id": "r", "error": {"code": 1, "message": "m"}}]
)
def test_a_posted_response_is_an_invalid_request_keeping_its_id(response: dict[str, Any]) -> None:
    """Clients must not POST responses → -32600; the id is still readable (checklist 9)."""
    exc = decode_error(body(**response))
    assert exc.error.code == codes.INVALID_REQUEST
    assert exc.request_id == response["id"]


@pytest.mark.parametrize(
    "obj",
    [
        {"id": 4, "method": "x"},
        {"jsonrpc": "1.0", "id": 4, "method": "x"},
        {"jsonrpc": 2.0, "id": 4, "method": "x"},
        {"jsonrpc": "2.0", "id": 4},
        {"jsonrpc": "2.0", "id": 4, "method": ""},
        {"jsonrpc": "2.0", "id": 4, "method": 12},
    ],
)
def test_an_envelope_without_version_or_method_is_an_invalid_request(obj: dict[str, Any]) -> None:
    """`jsonrpc: "2.0"` and a non-empty string method are required; the id is kept."""
    exc = decode_error(orjson.dumps(obj))
    assert exc.error.code == codes.INVALID_REQUEST
    assert exc.request_id == 4


@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_decode_error_only(raw: bytes) -> None:
    """The codec never raises anything but DecodeError, whatever the body."""
    try:
        codec.decode(raw)
    except codec.DecodeError as exc:
        assert exc.error.code in (codes.PARSE_ERROR, codes.INVALID_REQUEST)


@given(json_values)
def test_arbitrary_json_decodes_or_raises_decode_error_only(value: Any) -> None:
    """Every JSON document is either a Message or a DecodeError with a valid id or none."""
    try:
        msg = codec.decode(orjson.dumps(value))
    except codec.DecodeError as exc:
        assert exc.error.code in (codes.PARSE_ERROR, codes.INVALID_REQUEST)
        assert exc.request_id is None or isinstance(exc.request_id, str | int)
    else:
        assert isinstance(msg.method, str)
        assert msg.method


@given(
    st.dictionaries(
        st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"]), json_values
    )
)
def test_envelope_shaped_objects_decode_or_raise_decode_error_only(obj: dict[str, Any]) -> None:
    """Objects built from the envelope's own members, in any mix, never crash the codec."""
    try:
        msg = codec.decode(orjson.dumps(obj))
    except codec.DecodeError:
        return
    assert obj["jsonrpc"] == "2.0"
    if "id" in obj:
        assert msg.id == obj["id"]
        assert type(msg.id) is type(obj["id"])
    else:
        assert msg.is_notification


# --- encoding ----------------------------------------------------------------------------------


def test_results_errors_and_notifications_encode_as_json_rpc_2() -> None:
    """The three outgoing shapes, snapshotted whole."""
    assert orjson.loads(codec.encode_result("a", {"resultType": "complete"})) == {
        "jsonrpc": "2.0",
        "id": "a",
        "result": {"resultType": "complete"},
    }
    assert orjson.loads(codec.encode_error(None, err.ParseError())) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": codes.PARSE_ERROR, "message": err.ParseError().message},
    }
    assert orjson.loads(codec.encode_notification("notifications/progress", {"progress": 1})) == {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progress": 1},
    }


def test_error_data_is_sent_only_when_set() -> None:
    """`error.data` is optional: omitted when None, kept otherwise."""
    assert "data" not in err.InvalidParams("bad").to_wire()
    assert err.InvalidParams("bad", {"k": 1}).to_wire()["data"] == {"k": 1}


# --- the error tree ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "code", "status"),
    [
        (err.ParseError(), codes.PARSE_ERROR, 400),
        (err.InvalidRequest(), codes.INVALID_REQUEST, 400),
        (err.MethodNotFound(), codes.METHOD_NOT_FOUND, 404),
        (err.InvalidParams(), codes.INVALID_PARAMS, 200),
        (err.InvalidMeta(), codes.INVALID_PARAMS, 400),
        (err.InternalError(), codes.INTERNAL_ERROR, 200),
        (err.HeaderMismatch(), codes.HEADER_MISMATCH, 400),
        (err.tasks_capability_required(), codes.MISSING_REQUIRED_CLIENT_CAPABILITY, 400),
        (
            err.UnsupportedProtocolVersion("1900-01-01", ["2026-07-28"]),
            codes.UNSUPPORTED_PROTOCOL_VERSION,
            400,
        ),
    ],
)
def test_every_error_class_has_its_code_and_http_status(
    error: err.JsonRpcError, code: int, status: int
) -> None:
    """Spec error codes: -32601 is 404; -32020/-32021/-32022 and a missing `_meta` key are 400;
    a semantic -32602 is 200 (our choice where the spec fixes no status)."""
    assert (error.code, error.http_status) == (code, status)
    assert isinstance(error.message, str)
    assert error.message


def test_missing_capability_names_the_tasks_extension_as_an_object() -> None:
    """-32021 data is a ClientCapabilities object naming the extension (checklist 68, 137)."""
    data = err.tasks_capability_required().to_wire()["data"]
    assert data == {"requiredCapabilities": {"extensions": {codes.TASKS_EXTENSION: {}}}}


def test_unsupported_version_carries_supported_and_requested() -> None:
    """-32022 data holds `supported` (string array) and `requested` (checklist 17, 138)."""
    data = err.UnsupportedProtocolVersion("1900-01-01", ["2026-07-28"]).to_wire()["data"]
    assert data == {"supported": ["2026-07-28"], "requested": "1900-01-01"}


def test_no_error_class_uses_a_code_the_spec_forbids() -> None:
    """No legacy -32000..-32019 code and no undefined -32020..-32099 code (checklist 136)."""
    classes: list[type[err.JsonRpcError]] = [err.JsonRpcError, *_subclasses(err.JsonRpcError)]
    allowed = {codes.HEADER_MISMATCH, codes.MISSING_REQUIRED_CLIENT_CAPABILITY}
    allowed.add(codes.UNSUPPORTED_PROTOCOL_VERSION)
    for cls in classes:
        assert not -32019 <= cls.code <= -32000, cls
        assert not (-32099 <= cls.code <= -32020) or cls.code in allowed, cls


def _subclasses(cls: type[err.JsonRpcError]) -> list[type[err.JsonRpcError]]:
    out: list[type[err.JsonRpcError]] = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out
