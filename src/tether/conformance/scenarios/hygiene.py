"""Error-code hygiene and envelope rules over every reply of the run (CHECKLIST M, items 14,
54, 94), after a short sweep that provokes each error kind. Always runs, last."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from tether.conformance import spec
from tether.conformance.client import Exchange, make_meta
from tether.conformance.context import Context
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import is_int

CHECKS = (
    "http:sse-accel-buffering",
    "http:sse-no-requests",
    "envelope:result-type",
    "get:never-task",
    "errors:no-forbidden-codes",
    "errors:capability-data",
    "errors:version-data",
    "errors:http-status",
)
SHOWN = 3


async def _sweep(ctx: Context) -> None:
    c = ctx.client
    await c.call("tasks/get", {"taskId": "tk-conformance-x"}, caps=spec.CAPS_NONE)
    m = make_meta(spec.CAPS_NONE, version=spec.UNKNOWN_VERSION)
    await c.call(
        "server/discover", {"_meta": m}, headers={spec.H_PROTOCOL_VERSION: spec.UNKNOWN_VERSION}
    )
    await c.call("tether-conformance/none")
    await c.call("tools/list", headers={spec.H_METHOD: None})
    progress = await ctx.tool("test_tool_with_progress")
    if progress is not None:
        params = {"name": progress, "arguments": {}, "_meta": make_meta(progressToken="p-1")}
        await c.call("tools/call", params)


def _errors(exs: list[Exchange]) -> Iterator[tuple[Exchange, dict[str, Any]]]:
    for ex in exs:
        for m in ex.messages:
            if isinstance(m.get("error"), dict):
                yield ex, m["error"]


def _forbidden(error: dict[str, Any]) -> bool:
    code = error.get("code")
    if not is_int(code):
        return True
    return (
        code in spec.FORBIDDEN_CODES
        or code in spec.LEGACY_RANGE
        or (code in spec.SPEC_RANGE and code not in spec.SPEC_CODES)
    )


def _capability_data_ok(error: dict[str, Any]) -> bool:
    data = error.get("data")
    return isinstance(data, dict) and isinstance(data.get("requiredCapabilities"), dict)


def _version_data_ok(error: dict[str, Any]) -> bool:
    data = error.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("requested"), str):
        return False
    supported = data.get("supported")
    return isinstance(supported, list) and all(isinstance(v, str) for v in supported)


def _status_ok(ex: Exchange, error: dict[str, Any]) -> bool:
    code = error.get("code")
    wanted = spec.HTTP_STATUS.get(code) if isinstance(code, int) else None
    if ex.is_sse or wanted is None or error.get("code") in (spec.PARSE_ERROR, spec.INVALID_REQUEST):
        return True
    return ex.status == wanted


def _judge(ctx: Context, check: str, found: list[Exchange], bad: list[Exchange], what: str) -> None:
    if not found:
        ctx.skip(check, f"no {what} was seen in this run")
        return
    problems = [f"{len(bad)} of {len(found)} ({what}) break the rule"] if bad else []
    ctx.verdict(check, problems, f"{len(found)} checked ({what})", *bad[:SHOWN])


def _modern(ex: Exchange) -> bool:
    meta = ((ex.sent or {}).get("params") or {}).get("_meta") if isinstance(ex.sent, dict) else None
    version = meta.get(spec.META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    return (ex.sent_header(spec.H_PROTOCOL_VERSION) or "").strip() == spec.VERSION == version


async def run(ctx: Context) -> None:
    await _sweep(ctx)
    exs = list(ctx.client.exchanges)
    errors = list(_errors(exs))

    def errs(
        code: int | None, ok: Callable[[Exchange, dict[str, Any]], bool]
    ) -> tuple[list[Exchange], list[Exchange]]:
        chosen = [(ex, e) for ex, e in errors if code is None or e.get("code") == code]
        return [ex for ex, _ in chosen], [ex for ex, e in chosen if not ok(ex, e)]

    _judge(
        ctx, "errors:no-forbidden-codes", *errs(None, lambda _, e: not _forbidden(e)), "error reply"
    )
    _judge(
        ctx,
        "errors:capability-data",
        *errs(spec.MISSING_REQUIRED_CLIENT_CAPABILITY, lambda _, e: _capability_data_ok(e)),
        "-32021 reply",
    )
    _judge(
        ctx,
        "errors:version-data",
        *errs(spec.UNSUPPORTED_PROTOCOL_VERSION, lambda _, e: _version_data_ok(e)),
        "-32022 reply",
    )
    _judge(ctx, "errors:http-status", *errs(None, _status_ok), "error reply")

    successes = [ex for ex in exs if ex.result is not None and _modern(ex) and ex.rpc_method]
    typeless = [ex for ex in successes if not isinstance((ex.result or {}).get("resultType"), str)]
    _judge(ctx, "envelope:result-type", successes, typeless, "success reply")
    gets = [ex for ex in exs if ex.rpc_method == "tasks/get" and ex.result is not None]
    _judge(
        ctx,
        "get:never-task",
        gets,
        [ex for ex in gets if (ex.result or {}).get("resultType") == "task"],
        "tasks/get result",
    )

    streams = [ex for ex in exs if ex.is_sse]
    requests = [ex for ex in streams if any("method" in m and "id" in m for m in ex.messages)]
    _judge(ctx, "http:sse-no-requests", streams, requests, "SSE reply")
    buffered = [
        ex for ex in streams if (ex.header(spec.H_ACCEL_BUFFERING) or "").strip().lower() != "no"
    ]
    _judge(ctx, "http:sse-accel-buffering", streams, buffered, "SSE reply")


SCENARIO = FunctionScenario("hygiene", "error-code hygiene (every reply of the run)", CHECKS, run)
