"""Protocol versions: the version header, `-32022` and its data, legacy versions (CHECKLIST B,
item 79)."""

from __future__ import annotations

from typing import Any

from tether.conformance import spec
from tether.conformance.client import Exchange, make_meta
from tether.conformance.context import Context
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import describe, is_task_result, spec_error_problems

CHECKS = (
    "version:header-missing",
    "version:header-meta-mismatch",
    "version:unknown",
    "version:supported-subset",
    "version:legacy-not-served",
    "caps:legacy-version-no-task",
)
LEGACY = spec.LEGACY_VERSIONS[0]


async def _with_version(ctx: Context, header: str, meta_version: str) -> Exchange:
    m = make_meta(spec.CAPS_NONE, version=meta_version)
    return await ctx.client.call(
        "server/discover", {"_meta": m}, headers={spec.H_PROTOCOL_VERSION: header}
    )


def _version_data_problems(ex: Exchange, requested: str) -> list[str]:
    problems = spec_error_problems(ex, spec.UNSUPPORTED_PROTOCOL_VERSION)
    data = (ex.error or {}).get("data")
    if problems:
        return problems
    if not isinstance(data, dict):
        return ["error.data is missing"]
    supported = data.get("supported")
    if data.get("requested") != requested:
        problems.append(f"data.requested is {data.get('requested')!r}, not {requested!r}")
    if (
        not isinstance(supported, list)
        or not supported
        or not all(isinstance(v, str) for v in supported)
    ):
        problems.append(f"data.supported is not a non-empty string array: {supported!r}")
    return problems


def _legacy_handled(ex: Exchange) -> bool:
    """A reply an older, session-based revision could give: a 4xx refusal, or a result
    without a 2026 `resultType`."""
    if ex.result is not None:
        return "resultType" not in ex.result
    return ex.status is not None and 400 <= ex.status < 500


async def run(ctx: Context) -> None:
    c = ctx.client
    init, legacy_headers = await _legacy_init(ctx)
    legacy = legacy_headers is not None
    allowed = f" (it serves {LEGACY}, so this may be read as an older revision)"

    ex = await c.call("server/discover", headers={spec.H_PROTOCOL_VERSION: None})
    problems = spec_error_problems(ex, spec.HEADER_MISMATCH)
    if problems and legacy and _legacy_handled(ex):
        ctx.passed("version:header-missing", f"refused as a pre-2025-06-18 request{allowed}", ex)
    else:
        ctx.verdict("version:header-missing", problems, "-32020/400", ex)

    ex = await _with_version(ctx, spec.VERSION, spec.FUTURE_VERSION)
    problems = spec_error_problems(ex, spec.HEADER_MISMATCH)
    ctx.verdict("version:header-meta-mismatch", problems, "-32020/400", ex)

    unknown = await _with_version(ctx, spec.UNKNOWN_VERSION, spec.UNKNOWN_VERSION)
    problems = _version_data_problems(unknown, spec.UNKNOWN_VERSION)
    ctx.verdict("version:unknown", problems, "-32022/400 with data", unknown)

    discover = await ctx.discover()
    listed = (discover or {}).get("supportedVersions")
    supported = ((unknown.error or {}).get("data") or {}).get("supported")
    if not isinstance(listed, list) or not isinstance(supported, list):
        reason = "no supportedVersions or no -32022 data to compare"
        ctx.skip("version:supported-subset", reason, unknown)
    else:
        problems = []
        if spec.VERSION not in supported:
            problems.append(f"{spec.VERSION} is not in data.supported {supported}")
        extra = [v for v in supported if v not in listed]
        if extra:
            problems.append(f"data.supported lists {extra}, which discover does not")
        ctx.verdict("version:supported-subset", problems, "a subset of supportedVersions", unknown)

    if isinstance(listed, list) and LEGACY in listed:
        ctx.skip("version:legacy-not-served", f"the server lists {LEGACY} in supportedVersions")
    else:
        ex = await _with_version(ctx, LEGACY, LEGACY)
        problems = _version_data_problems(ex, LEGACY)
        data = (ex.error or {}).get("data") or {}
        if not problems and spec.VERSION not in (data.get("supported") or []):
            problems.append(f"data.supported does not list {spec.VERSION}")
        if problems and legacy and _legacy_handled(ex):
            ctx.passed("version:legacy-not-served", f"handled as a legacy request{allowed}", ex)
        else:
            ctx.verdict("version:legacy-not-served", problems, "-32022/400 listing 2026-07-28", ex)

    await _legacy_no_task(ctx, init, legacy_headers)


async def _legacy_init(ctx: Context) -> tuple[Exchange, dict[str, str] | None]:
    """An `initialize` at 2025-11-25 declaring the extension; the headers for later legacy
    requests (None when the server does not serve that revision)."""
    c = ctx.client
    base = {"Content-Type": spec.JSON, "Accept": spec.ACCEPT, **c.extra_headers}
    init: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": c.next_id(),
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {"extensions": {spec.TASKS_EXTENSION: {}}},
            "clientInfo": {"name": "tether-conformance", "version": "1"},
        },
    }
    ex = await c.post(init, base)
    if ex.result is None or ex.result.get("protocolVersion") != LEGACY:
        return ex, None
    h = {**base, spec.H_PROTOCOL_VERSION: LEGACY}
    session = ex.header(spec.H_SESSION_ID)
    if session:
        h[spec.H_SESSION_ID] = session
    await c.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, h)
    return ex, h


async def _legacy_no_task(ctx: Context, init: Exchange, h: dict[str, str] | None) -> None:
    """Item 79: under a legacy version (if served) declaring the extension yields no task."""
    check = "caps:legacy-version-no-task"
    slow = await ctx.need("slow_compute", [check])
    if slow is None:
        return
    if h is None:
        ctx.skip(check, f"the server does not serve {LEGACY} ({describe(init)})", init)
        return
    meta: dict[str, Any] = {
        spec.META_CLIENT_CAPABILITIES: {"extensions": {spec.TASKS_EXTENSION: {}}}
    }
    call = {
        "jsonrpc": "2.0",
        "id": ctx.client.next_id(),
        "method": "tools/call",
        "params": {"name": slow, "arguments": {"seconds": 1, "label": "legacy"}, "_meta": meta},
    }
    ex = await ctx.client.post(call, h)
    problems = (
        [f"a legacy call returned a task: {describe(ex)}"] if is_task_result(ex.result) else []
    )
    if ex.result is None and ex.error is None:
        problems.append(f"no JSON-RPC reply: {describe(ex)}")
    ctx.verdict(check, problems, f"no task under {LEGACY}", ex)


SCENARIO = FunctionScenario("versions", "protocol versions", CHECKS, run)
