"""The stateless request envelope: required `_meta` keys, capabilities per request
(CHECKLIST items 20-26)."""

from __future__ import annotations

from tether.conformance import spec
from tether.conformance.client import make_meta
from tether.conformance.context import LONG_S, Context
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import (
    describe,
    error_problems,
    result_problems,
    spec_error_problems,
)

CHECKS = (
    "meta:params-missing",
    "meta:meta-missing",
    "meta:protocol-version-missing",
    "meta:capabilities-missing",
    "meta:client-info-optional",
    "meta:capabilities-not-object",
    "meta:capabilities-per-request",
)
INVALID = spec.INVALID_PARAMS


async def run(ctx: Context) -> None:
    c = ctx.client
    h = c.headers("server/discover")
    bare = {"jsonrpc": "2.0", "method": "server/discover"}
    ex = await c.post({**bare, "id": c.next_id()}, h)
    ctx.verdict("meta:params-missing", error_problems(ex, INVALID, 400), "-32602/400", ex)
    ex = await c.post({**bare, "id": c.next_id(), "params": {}}, h)
    ctx.verdict("meta:meta-missing", error_problems(ex, INVALID, 400), "-32602/400", ex)

    for check, key in (
        ("meta:protocol-version-missing", spec.META_PROTOCOL_VERSION),
        ("meta:capabilities-missing", spec.META_CLIENT_CAPABILITIES),
        ("meta:client-info-optional", spec.META_CLIENT_INFO),
    ):
        m = make_meta(spec.CAPS_NONE)
        del m[key]
        ex = await c.call("server/discover", {"_meta": m})
        if check == "meta:client-info-optional":
            ctx.verdict(check, result_problems(ex), "served without clientInfo", ex)
        else:
            ctx.verdict(check, error_problems(ex, INVALID, 400), "-32602/400", ex)

    ex = await c.call("server/discover", caps="x")
    ctx.verdict("meta:capabilities-not-object", error_problems(ex, INVALID, 400), "-32602/400", ex)

    check = "meta:capabilities-per-request"
    slow = await ctx.need("slow_compute", [check])
    if slow is None:
        return
    created = await ctx.call_tool(slow, "slow_compute", seconds=LONG_S)
    if created.task_id is None:
        ctx.skip(
            check,
            f"precondition: {slow} created no task ({describe(created.exchange)})",
            created.exchange,
        )
        return
    ex = await ctx.get(created.task_id, caps=spec.CAPS_NONE)
    problems = spec_error_problems(ex, spec.MISSING_REQUIRED_CLIENT_CAPABILITY)
    ctx.verdict(
        check,
        problems,
        "-32021/400: nothing inherited from the creating request",
        created.exchange,
        ex,
    )


SCENARIO = FunctionScenario("meta", "stateless _meta", CHECKS, run)
