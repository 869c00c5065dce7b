"""Origin and content type: DNS-rebinding protection and what the endpoint accepts
(CHECKLIST items 4, 5 and two extras)."""

from __future__ import annotations

import httpx

from tether.conformance import spec
from tether.conformance.client import dumps, make_meta
from tether.conformance.context import Context
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import describe

CHECKS = (
    "origin:foreign-403",
    "origin:absent-or-local-ok",
    "origin:content-type",
    "origin:accept",
)
FOREIGN = "http://evil.example"


async def run(ctx: Context) -> None:
    c = ctx.client
    ex = await c.call("server/discover", headers={"Origin": FOREIGN})
    ok = ex.status == 403
    ctx.verdict(
        "origin:foreign-403", [] if ok else [f"Origin {FOREIGN}: {describe(ex)}"], "403", ex
    )

    u = httpx.URL(c.url)
    own = f"{u.scheme}://{u.netloc.decode()}"
    exs = [
        await c.call("server/discover"),
        await c.call("server/discover", headers={"Origin": own}),
    ]
    problems = [describe(e) for e in exs if e.status != 200 or e.result is None]
    ctx.verdict(
        "origin:absent-or-local-ok", problems, f"served without Origin and with {own}", *exs
    )

    body = dumps(
        {
            "jsonrpc": "2.0",
            "id": c.next_id(),
            "method": "server/discover",
            "params": {"_meta": make_meta()},
        }
    )
    ex = await c.post(body, {**c.headers("server/discover"), "Content-Type": "text/plain"})
    if ex.status is None or ex.status >= 500:
        ctx.record("origin:content-type", "fail", f"text/plain body: {describe(ex)}", ex)
    else:
        refused = 400 <= ex.status < 500
        ctx.verdict(
            "origin:content-type",
            [] if refused else [f"text/plain served: {describe(ex)}"],
            f"refused with {ex.status}",
            ex,
        )

    ex = await c.call("server/discover", headers={"Accept": spec.JSON})
    ok = ex.status is not None and (
        400 <= ex.status < 500 or (ex.status == 200 and ex.result is not None)
    )
    ctx.verdict(
        "origin:accept",
        [] if ok else [f"Accept: {spec.JSON} only: {describe(ex)}"],
        f"HTTP {ex.status}",
        ex,
    )


SCENARIO = FunctionScenario("origin", "origin & content type", CHECKS, run)
