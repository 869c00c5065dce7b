"""The router (pure; handlers are local coroutines): method resolution per era, removed methods,
error mapping, and `resultType` on modern results. Spec: MCP 2026-07-28 basic/index (error
codes, `resultType`), changelog (removed methods)."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
from pydantic import BaseModel, Field, field_validator

from tether.jsonrpc import codec, codes
from tether.jsonrpc.errors import (
    HeaderMismatch,
    InternalError,
    InvalidParams,
    JsonRpcError,
    MethodNotFound,
    tasks_capability_required,
)
from tether.jsonrpc.headers import Era, Route
from tether.jsonrpc.router import RequestContext, Router, parse_params

LEAKY = "db at /srv/private/path refused user hunter2"


def ctx(method: str, params: dict[str, Any] | None = None, era: Era = "modern") -> RequestContext:
    version = codes.MODERN_VERSION if era == "modern" else codes.LEGACY_VERSIONS[0]
    return RequestContext(method, params or {}, Route(era, version), {}, request_id=1)


async def ok(_: RequestContext) -> dict[str, Any]:
    return {"value": 1}


def router_with(**handlers: Any) -> Router:
    r = Router()
    for name, handler in handlers.items():
        r.add(name.replace("__", "/"), handler)
    return r


async def failure(r: Router, c: RequestContext) -> JsonRpcError:
    with pytest.raises(JsonRpcError) as caught:
        await r.dispatch(c)
    return caught.value


# --- resolution --------------------------------------------------------------------------------


async def test_an_unknown_method_is_method_not_found() -> None:
    """`foo/bar` → -32601, sent with HTTP 404 (checklist 46)."""
    exc = await failure(router_with(tools__list=ok), ctx("foo/bar"))
    assert isinstance(exc, MethodNotFound)
    assert (exc.code, exc.http_status) == (codes.METHOD_NOT_FOUND, 404)


@pytest.mark.parametrize("method", sorted(codes.REMOVED_METHODS))
async def test_removed_methods_are_not_found_under_2026_even_when_registered(method: str) -> None:
    """initialize, ping, logging/setLevel, resources/(un)subscribe, tasks/result, tasks/list
    → -32601 under 2026-07-28, whatever is registered (checklist 47-52, 132)."""
    r = Router()
    r.add(method, ok, eras=("modern", "legacy"))
    exc = await failure(r, ctx(method))
    assert isinstance(exc, MethodNotFound)


@pytest.mark.parametrize("method", ["initialize", "ping"])
async def test_removed_methods_still_serve_legacy_requests(method: str) -> None:
    """A server that also speaks the 2025 revisions answers their `initialize` and `ping`."""
    r = Router()
    r.add(method, ok, eras=("legacy",))
    assert await r.dispatch(ctx(method, era="legacy")) == {"value": 1}


async def test_a_method_registered_for_one_era_is_not_found_in_the_other() -> None:
    """Eras are separate method tables."""
    r = Router()
    r.add("legacy/only", ok, eras=("legacy",))
    r.add("modern/only", ok)
    assert isinstance(await failure(r, ctx("legacy/only")), MethodNotFound)
    assert isinstance(await failure(r, ctx("modern/only", era="legacy")), MethodNotFound)
    assert r.methods("modern") == ["modern/only"]
    assert r.methods("legacy") == ["legacy/only"]


def test_a_method_cannot_be_registered_twice() -> None:
    """Registration mistakes fail loudly at start-up."""
    r = router_with(tools__list=ok)
    with pytest.raises(ValueError, match="twice"):
        r.add("tools/list", ok)


def test_streams_reports_only_streaming_methods() -> None:
    """Only methods registered with `streams=True` may answer with SSE."""
    r = Router()
    r.add("tools/call", ok, streams=True)
    r.add("tools/list", ok)
    assert r.streams("tools/call")
    assert not r.streams("tools/list")
    assert not r.streams("nope")


# --- resultType --------------------------------------------------------------------------------


async def test_modern_results_get_result_type_complete() -> None:
    """Every 2026-07-28 result carries `resultType`; the default is "complete" (checklist
    54)."""
    result = await router_with(tools__list=ok).dispatch(ctx("tools/list"))
    assert result == {"value": 1, "resultType": "complete"}


@pytest.mark.parametrize("kind", ["task", "input_required"])
async def test_a_result_type_set_by_the_handler_is_kept(kind: str) -> None:
    """CreateTaskResult and InputRequiredResult keep their own discriminator."""

    async def handler(_: RequestContext) -> dict[str, Any]:
        return {"resultType": kind}

    assert await router_with(tools__call=handler).dispatch(ctx("tools/call")) == {
        "resultType": kind
    }


async def test_legacy_results_get_no_result_type() -> None:
    """The 2025 revisions have no `resultType`."""
    r = Router()
    r.add("tools/list", ok, eras=("legacy",))
    assert await r.dispatch(ctx("tools/list", era="legacy")) == {"value": 1}


# --- error mapping -----------------------------------------------------------------------------


async def test_json_rpc_errors_from_a_handler_pass_through_unchanged() -> None:
    """A handler's -32021 / -32020 reaches the wire as raised (checklist 137)."""
    raised = tasks_capability_required()

    async def handler(_: RequestContext) -> dict[str, Any]:
        raise raised

    assert await failure(router_with(tasks__get=handler), ctx("tasks/get")) is raised

    async def mismatch(_: RequestContext) -> dict[str, Any]:
        raise HeaderMismatch("Mcp-Param-Region header is required")

    exc = await failure(router_with(tools__call=mismatch), ctx("tools/call"))
    assert (exc.code, exc.http_status) == (codes.HEADER_MISMATCH, 400)


class Params(BaseModel):
    taskId: str = Field(min_length=1)
    count: int = Field(0, ge=0)


async def test_a_validation_error_in_a_handler_is_invalid_params() -> None:
    """pydantic ValidationError → -32602 with HTTP 200 (our choice: the spec fixes no status)."""

    async def handler(c: RequestContext) -> dict[str, Any]:
        Params.model_validate(c.params)
        return {}

    exc = await failure(router_with(tasks__get=handler), ctx("tasks/get", {"count": -1}))
    assert isinstance(exc, InvalidParams)
    assert (exc.code, exc.http_status) == (codes.INVALID_PARAMS, 200)
    orjson.loads(codec.encode_error(1, exc))  # the reply can be sent


class Checked(BaseModel):
    text: str

    @field_validator("text")
    @classmethod
    def not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("text must not be blank")
        return value


async def test_invalid_params_from_a_custom_validator_can_be_encoded() -> None:
    """A validator's ValueError still becomes an encodable -32602 (no internal exception object
    reaches `error.data`)."""

    async def handler(c: RequestContext) -> dict[str, Any]:
        Checked.model_validate(c.params)
        return {}

    exc = await failure(router_with(tools__call=handler), ctx("tools/call", {"text": " "}))
    assert isinstance(exc, InvalidParams)
    reply = orjson.loads(codec.encode_error(1, exc))
    assert reply["error"]["code"] == codes.INVALID_PARAMS


def test_parse_params_reports_failing_fields_in_encodable_data() -> None:
    """parse_params → -32602 naming the fields, even for custom validators."""
    with pytest.raises(InvalidParams) as caught:
        parse_params(Checked, {"text": " "})
    reply = orjson.loads(codec.encode_error(1, caught.value))
    assert reply["error"]["data"]["errors"][0]["loc"] == ["text"]


async def test_an_unexpected_exception_is_a_generic_internal_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Anything else → -32603 whose message and data reveal nothing of the exception; the
    details go to the log."""

    async def handler(_: RequestContext) -> dict[str, Any]:
        raise RuntimeError(LEAKY)

    with caplog.at_level(logging.ERROR, logger="tether.jsonrpc.router"):
        exc = await failure(router_with(tools__list=handler), ctx("tools/list"))
    assert isinstance(exc, InternalError)
    assert exc.code == codes.INTERNAL_ERROR
    wire = orjson.dumps(exc.to_wire()).decode()
    assert "hunter2" not in wire
    assert "RuntimeError" not in wire
    assert any("hunter2" in (r.exc_text or "") for r in caplog.records)


async def test_an_unknown_method_is_refused_before_any_handler_runs() -> None:
    """Resolution precedes dispatch: nothing runs for an unknown method."""
    calls: list[str] = []

    async def handler(c: RequestContext) -> dict[str, Any]:
        calls.append(c.method)
        return {}

    r = router_with(tools__list=handler)
    with pytest.raises(MethodNotFound):
        await r.dispatch(ctx("tools/lists"))
    assert calls == []


# --- notifications -----------------------------------------------------------------------------


async def test_an_unhandled_notification_is_not_delivered() -> None:
    """deliver() says whether anyone accepts the notification."""
    assert await Router().deliver(ctx("notifications/whatever")) is False


async def test_a_failing_notification_handler_is_still_accepted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A notification has no reply: a handler failure is logged, and the POST stays 202."""
    r = Router()

    async def boom(_: RequestContext) -> None:
        raise RuntimeError("boom")

    r.notification("notifications/cancelled", boom)
    with caplog.at_level(logging.ERROR, logger="tether.jsonrpc.router"):
        assert await r.deliver(ctx("notifications/cancelled")) is True
    assert caplog.records


# --- the request context -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "expected"),
    [("t1", "t1"), (7, 7), (True, None), (1.5, None), (None, None), ({"a": 1}, None)],
)
def test_the_progress_token_is_a_string_or_integer(token: Any, expected: Any) -> None:
    """`_meta.progressToken` is a string or number; booleans and others are ignored."""
    c = ctx("tools/call", {"_meta": {"progressToken": token}})
    assert c.progress_token == expected
