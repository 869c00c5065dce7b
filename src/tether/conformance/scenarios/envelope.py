"""Envelope and errors: HTTP basics (CHECKLIST A) and method routing (CHECKLIST D)."""

from __future__ import annotations

from typing import Any

from tether.conformance import spec
from tether.conformance.client import make_meta
from tether.conformance.context import Context
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import describe, error_problems, spec_error_problems

CHECKS = (
    "http:discover-ok",
    "http:get-405",
    "http:delete-405",
    "http:parse-error",
    "http:batch-rejected",
    "http:null-id-rejected",
    "http:response-rejected",
    "http:notification-202",
    "http:error-keeps-id",
    "http:session-id-ignored",
    "http:last-event-id-ignored",
    "routing:unknown-method",
    "routing:initialize-removed",
    "routing:ping-removed",
    "routing:logging-removed",
    "routing:subscribe-removed",
    "routing:tasks-result-removed",
    "routing:tasks-list-removed",
    "routing:unadvertised-capability",
)
M0 = spec.CAPS_NONE
#: Capabilities whose methods we can probe when the server does not advertise them.
UNADVERTISED_PROBES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("prompts", "prompts/list", {}),
    ("resources", "resources/list", {}),
    (
        "completions",
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": "b"}},
    ),
)


async def run(ctx: Context) -> None:
    await _basics(ctx)
    await _bad_bodies(ctx)
    await _ids_and_sessions(ctx)
    await _removed_methods(ctx)


async def _basics(ctx: Context) -> None:
    c = ctx.client
    ex = await c.call("server/discover", caps=M0, request_id="d-1")
    problems = []
    if ex.status != 200:
        problems.append(f"HTTP {ex.status}")
    if ex.content_type not in (spec.JSON, spec.SSE):
        problems.append(f"Content-Type {ex.content_type!r}")
    if ex.reply is None or ex.reply.get("id") != "d-1" or ex.result is None:
        problems.append(f"expected a result with id 'd-1', got {describe(ex)}")
    ctx.verdict("http:discover-ok", problems, "200 with the same id and a result", ex)

    for method, check in (("GET", "http:get-405"), ("DELETE", "http:delete-405")):
        ex = await c.send(method, {"Accept": spec.SSE, **c.extra_headers})
        ok = ex.status == 405
        ctx.verdict(check, [] if ok else [f"{method} gave {describe(ex)}"], f"{method} is 405", ex)


async def _bad_bodies(ctx: Context) -> None:
    c = ctx.client
    h = c.headers("server/discover")
    one = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": make_meta()}}
    cases = (
        ("http:parse-error", b'{"jsonrpc": "2.0", not json', spec.PARSE_ERROR),
        ("http:batch-rejected", [one], spec.INVALID_REQUEST),
        ("http:null-id-rejected", {**one, "id": None}, spec.INVALID_REQUEST),
        (
            "http:response-rejected",
            {"jsonrpc": "2.0", "id": 5, "result": {"resultType": "complete"}},
            spec.INVALID_REQUEST,
        ),
    )
    for check, body, code in cases:
        ex = await c.post(body, h)
        problems = error_problems(ex, code, 400)
        if check == "http:parse-error" and ex.reply is not None and ex.reply.get("id") is not None:
            problems.append(f"the reply has id {ex.reply['id']!r}; it cannot know one")
        ctx.verdict(check, problems, f"400 with {code}", ex)

    tried = []
    for method, params in (
        ("notifications/cancelled", {"requestId": "never-sent", "reason": "conformance"}),
        ("notifications/roots/list_changed", {}),
    ):
        note = {"jsonrpc": "2.0", "method": method, "params": {**params, "_meta": make_meta()}}
        ex = await c.post(note, c.headers(method))
        tried.append(ex)
        if ex.status == 202:
            problems = [] if not ex.response_text.strip() else ["the 202 has a body"]
            ctx.verdict("http:notification-202", problems, f"{method} → 202, empty", ex)
            return
        if ex.status is None or not 400 <= ex.status < 500:
            ctx.violated("http:notification-202", f"{method} gave {describe(ex)}", ex)
            return
    ctx.skip("http:notification-202", "the server refused (4xx) every notification tried", *tried)


async def _ids_and_sessions(ctx: Context) -> None:
    c = ctx.client
    problems: list[str] = []
    seen = []
    for rid in ("7", 7, "x-y", 0):
        for ex in (
            await c.call("foo/bar", request_id=rid),
            await c.call("tools/list", request_id=rid, headers={spec.H_METHOD: None}),
        ):
            seen.append(ex)
            got = (ex.reply or {}).get("id", "<absent>")
            if ex.error is None or got != rid or type(got) is not type(rid):
                problems.append(f"id {rid!r} came back as {got!r} ({describe(ex)})")
    ctx.verdict("http:error-keeps-id", problems, "every error kept the id and its type", *seen)

    ex = await c.call("server/discover", headers={spec.H_SESSION_ID: "s-conformance-1"})
    problems = [] if ex.result is not None and ex.status == 200 else [describe(ex)]
    if ex.header(spec.H_SESSION_ID) is not None:
        problems.append(f"the reply sets {spec.H_SESSION_ID}")
    ctx.verdict("http:session-id-ignored", problems, "served; no session id", ex)

    ex = await c.call("server/discover", headers={spec.H_LAST_EVENT_ID: "evt-9"})
    ok = ex.result is not None and ex.status == 200
    ctx.verdict("http:last-event-id-ignored", [] if ok else [describe(ex)], "served", ex)


async def _removed_methods(ctx: Context) -> None:
    c = ctx.client
    init = {
        "protocolVersion": spec.VERSION,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    simple: tuple[tuple[str, str, dict[str, Any]], ...] = (
        ("routing:unknown-method", "foo/bar", {}),
        ("routing:initialize-removed", "initialize", init),
        ("routing:ping-removed", "ping", {}),
        ("routing:logging-removed", "logging/setLevel", {"level": "debug"}),
        ("routing:tasks-result-removed", "tasks/result", {"taskId": "tk-conformance-none"}),
        ("routing:tasks-list-removed", "tasks/list", {}),
    )
    for check, method, params in simple:
        ex = await c.call(method, params)
        ctx.verdict(check, spec_error_problems(ex, spec.METHOD_NOT_FOUND), "-32601/404", ex)

    exs = [
        await c.call(m, {"uri": "test://static-text"})
        for m in ("resources/subscribe", "resources/unsubscribe")
    ]
    problems = [p for ex in exs for p in spec_error_problems(ex, spec.METHOD_NOT_FOUND)]
    ctx.verdict("routing:subscribe-removed", problems, "both -32601/404", *exs)

    discover = await ctx.discover()
    caps = discover.get("capabilities") if discover else None
    if not isinstance(caps, dict):
        ctx.skip("routing:unadvertised-capability", "server/discover gave no capabilities")
        return
    for cap, method, params in UNADVERTISED_PROBES:
        if cap not in caps:
            ex = await c.call(method, params)
            problems = spec_error_problems(ex, spec.METHOD_NOT_FOUND)
            ctx.verdict("routing:unadvertised-capability", problems, f"{method} → -32601/404", ex)
            return
    ctx.skip("routing:unadvertised-capability", "the server advertises every probed capability")


SCENARIO = FunctionScenario("envelope", "envelope & errors", CHECKS, run)
