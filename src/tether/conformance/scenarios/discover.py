"""`server/discover`, `tools/list` and caching hints, plain `tools/call` (CHECKLIST E)."""

from __future__ import annotations

from typing import Any

from tether.conformance import spec
from tether.conformance.client import Exchange
from tether.conformance.context import Context
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import (
    describe,
    error_problems,
    result_problems,
)

CHECKS = (
    "discover:complete-and-version",
    "discover:tasks-extension",
    "discover:no-legacy-tasks",
    "discover:cache-hints",
    "discover:server-info",
    "discover:caps-independent",
    "tools-list:shape",
    "tools-list:page-scope",
    "tools-list:order",
    "tools-list:stable",
    "tools-call:unknown-tool",
    "tools-call:sync",
)


def cache_problems(result: dict[str, Any]) -> list[str]:
    problems = []
    ttl = result.get("ttlMs")
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
        problems.append(f"ttlMs is {ttl!r}, not an integer >= 0")
    if result.get("cacheScope") not in spec.CACHE_SCOPES:
        problems.append(f"cacheScope is {result.get('cacheScope')!r}")
    return problems


async def run(ctx: Context) -> None:
    await _discover(ctx)
    await _tools(ctx)


async def _discover(ctx: Context) -> None:
    c = ctx.client
    d0 = await c.call("server/discover", caps=spec.CAPS_NONE)
    dt = await c.call("server/discover", caps=spec.CAPS_TASKS)
    if d0.result is None:
        ctx.skip_all(CHECKS[:6], f"precondition: server/discover failed ({describe(d0)})")
        return
    r = d0.result
    problems = result_problems(d0)
    if r.get("resultType") != "complete":
        problems.append(f"resultType is {r.get('resultType')!r}")
    versions = r.get("supportedVersions")
    if not isinstance(versions, list) or spec.VERSION not in versions:
        problems.append(f"supportedVersions {versions!r} lacks {spec.VERSION}")
    ctx.verdict("discover:complete-and-version", problems, "complete, lists 2026-07-28", d0)
    _extensions(ctx, r, d0)
    ctx.verdict("discover:cache-hints", cache_problems(r), "ttlMs and cacheScope are valid", d0)
    _server_info(ctx, r, d0)
    other = (dt.result or {}).get("capabilities")
    same = other == r.get("capabilities")
    ctx.verdict(
        "discover:caps-independent",
        [] if same else ["capabilities differ between M0 and M+T"],
        "the same capabilities",
        d0,
        dt,
    )


def _extensions(ctx: Context, r: dict[str, Any], d0: Exchange) -> None:
    """The tasks extension is advertised as {}, and no legacy top-level tasks capability."""
    raw_caps = r.get("capabilities")
    caps: dict[str, Any] = raw_caps if isinstance(raw_caps, dict) else {}
    ext = caps.get("extensions") or {}
    got = ext.get(spec.TASKS_EXTENSION, "<absent>") if isinstance(ext, dict) else "<absent>"
    ctx.verdict(
        "discover:tasks-extension",
        [] if got == {} else [f"extensions[{spec.TASKS_EXTENSION}] is {got!r}, not {{}}"],
        "the tasks extension is advertised as {}",
        d0,
    )
    legacy = "tasks" in caps
    ctx.verdict(
        "discover:no-legacy-tasks",
        ["a top-level tasks capability"] if legacy else [],
        "no legacy tasks capability",
        d0,
    )


def _server_info(ctx: Context, r: dict[str, Any], d0: Exchange) -> None:
    info = (
        (r.get("_meta") or {}).get(spec.META_SERVER_INFO)
        if isinstance(r.get("_meta"), dict)
        else None
    )
    ok = (
        isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
    )
    ctx.verdict(
        "discover:server-info",
        [] if ok else [f"serverInfo is {info!r}"],
        "serverInfo has name and version",
        d0,
    )


async def _pages(ctx: Context) -> tuple[list[str], set[Any], list[Exchange], list[str]]:
    """Names over every page, the cacheScopes seen, the exchanges, and shape problems."""
    names: list[str] = []
    scopes: set[Any] = set()
    exs: list[Exchange] = []
    problems: list[str] = []
    params: dict[str, Any] = {}
    for _ in range(100):
        ex = await ctx.client.call("tools/list", params)
        exs.append(ex)
        page = ex.result
        if page is None:
            problems.append(describe(ex))
            break
        if page.get("resultType") != "complete":
            problems.append(f"resultType is {page.get('resultType')!r}")
        if not isinstance(page.get("tools"), list):
            problems.append("no tools array")
            break
        problems += cache_problems(page)
        scopes.add(page.get("cacheScope"))
        names += [str(t.get("name")) for t in page["tools"] if isinstance(t, dict)]
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
        params = {"cursor": cursor}
    return names, scopes, exs, problems


async def _tools(ctx: Context) -> None:
    c = ctx.client
    first, scopes, exs, list_problems = await _pages(ctx)
    ctx.verdict(
        "tools-list:shape",
        sorted(set(list_problems)),
        f"{len(first)} tools, cache hints on every page",
        *exs,
    )
    if list_problems:
        ctx.skip_all(CHECKS[7:10], "precondition: tools/list failed")
    else:
        scope_problems = (
            [] if len(scopes) == 1 else [f"pages use cacheScopes {sorted(map(str, scopes))}"]
        )
        ctx.verdict(
            "tools-list:page-scope", scope_problems, f"{len(exs)} page(s), one cacheScope", *exs
        )
        second, _, exs2, _ = await _pages(ctx)
        order = [] if second == first else ["the second listing has a different order"]
        ctx.verdict("tools-list:order", order, "the same order twice", exs[0], exs2[0])

    ex = await c.call("tools/call", {"name": "tether-conformance-no-such-tool", "arguments": {}})
    ctx.verdict("tools-call:unknown-tool", error_problems(ex, spec.INVALID_PARAMS), "-32602", ex)

    greet = await ctx.need("greet", ["tools-call:sync", "tools-list:stable"])
    if greet is None:
        return
    ex = await c.call("tools/call", {"name": greet, "arguments": {"name": "conformance"}})
    problems = result_problems(ex)
    r = ex.result or {}
    if not problems:
        if r.get("resultType") != "complete":
            problems.append(f"resultType is {r.get('resultType')!r}")
        if not isinstance(r.get("content"), list):
            problems.append("no content array")
        if "taskId" in r:
            problems.append("a taskId on a sync result")
    ctx.verdict("tools-call:sync", problems, "complete with content, no taskId", ex)

    if not list_problems:
        after, _, exs3, _ = await _pages(ctx)
        stable = (
            []
            if sorted(after) == sorted(first)
            else [f"the tool set changed: {sorted(set(after) ^ set(first))}"]
        )
        ctx.verdict(
            "tools-list:stable", stable, "the same tool set after a tools/call", exs[0], exs3[0]
        )


SCENARIO = FunctionScenario("discover", "server/discover & caching", CHECKS, run)
