"""Routing headers and Base64 names: `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*` (CHECKLIST C)."""

from __future__ import annotations

from typing import Any

from tether.conformance import spec
from tether.conformance.client import b64, make_meta
from tether.conformance.context import LONG_S, Context, header_args
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import describe, result_problems, spec_error_problems

CHECKS = (
    "headers:method-missing",
    "headers:method-mismatch",
    "headers:method-case",
    "headers:name-case-insensitive",
    "headers:name-missing",
    "headers:name-mismatch",
    "headers:name-base64",
    "headers:base64-bad-padding",
    "headers:base64-bad-chars",
    "headers:base64-uppercase-literal",
    "headers:name-whitespace",
    "headers:task-name-match",
    "headers:task-get-name-mismatch",
    "headers:task-update-name-mismatch",
    "headers:task-cancel-name-mismatch",
    "headers:task-name-missing",
    "headers:task-method-mismatch",
    "headers:param-missing",
    "headers:param-mismatch",
    "headers:param-match",
)
TASK_CHECKS = CHECKS[11:17]
PARAM_CHECKS = CHECKS[17:]
MISMATCH = spec.HEADER_MISMATCH


async def run(ctx: Context) -> None:
    await _method_header(ctx)
    await _name_header(ctx)
    await _task_headers(ctx)
    await _param_headers(ctx)


async def _method_header(ctx: Context) -> None:
    c = ctx.client
    cases = (
        ("headers:method-missing", "tools/list", None),
        ("headers:method-mismatch", "server/discover", "tools/list"),
        ("headers:method-case", "tools/list", "TOOLS/LIST"),
    )
    for check, method, value in cases:
        ex = await c.call(method, headers={spec.H_METHOD: value})
        ctx.verdict(check, spec_error_problems(ex, MISMATCH), "-32020/400", ex)

    exs = [
        await c.call("tools/list", headers={spec.H_METHOD: None, name: "tools/list"})
        for name in ("mcp-method", "MCP-METHOD")
    ]
    problems = [
        f"{ex.sent_header('mcp-method')}: {describe(ex)}" for ex in exs if result_problems(ex)
    ]
    ctx.verdict(
        "headers:name-case-insensitive", problems, "lower- and upper-case names served", *exs
    )


async def _name_header(ctx: Context) -> None:
    c = ctx.client
    checks = CHECKS[4:11]
    greet = await ctx.need("greet", checks)
    if greet is None:
        return
    call = {"name": greet, "arguments": {"name": "conformance"}}
    refused = (
        ("headers:name-missing", None),
        ("headers:name-mismatch", greet + "-other"),
        ("headers:base64-bad-padding", "=?base64?SGVsbG8?="),
        ("headers:base64-bad-chars", "=?base64?SGVs!!!bG8=?="),
        ("headers:base64-uppercase-literal", "=?BASE64?" + b64(greet)[9:]),
    )
    for check, value in refused:
        ex = await c.call("tools/call", call, headers={spec.H_NAME: value})
        ctx.verdict(check, spec_error_problems(ex, MISMATCH), "-32020/400", ex)

    ex = await c.call("tools/call", call, headers={spec.H_NAME: b64(greet)})
    ctx.verdict("headers:name-base64", result_problems(ex), "decoded and served", ex)

    body = {
        "jsonrpc": "2.0",
        "id": c.next_id(),
        "method": "tools/call",
        "params": {**call, "_meta": make_meta()},
    }
    hdrs = {**c.headers("tools/call", call), spec.H_NAME: f"   {greet}  "}
    ex = await c.post(body, hdrs)
    if ex.transport_error and ex.transport_error.startswith("cannot send"):
        ctx.skip(
            "headers:name-whitespace", f"cannot send a padded header here: {ex.transport_error}", ex
        )
    else:
        ctx.verdict("headers:name-whitespace", result_problems(ex), "trimmed and served", ex)


async def _task_headers(ctx: Context) -> None:
    c = ctx.client
    slow = await ctx.need("slow_compute", TASK_CHECKS)
    if slow is None:
        return
    created = await ctx.call_tool(slow, "slow_compute", seconds=LONG_S)
    task_id = created.task_id
    if task_id is None:
        ctx.skip_all(
            TASK_CHECKS, f"precondition: {slow} created no task ({describe(created.exchange)})"
        )
        return
    ex = await ctx.get(task_id)
    problems = result_problems(ex)
    if ex.result is not None and ex.result.get("taskId") != task_id:
        problems.append(f"taskId {ex.result.get('taskId')!r}")
    ctx.verdict("headers:task-name-match", problems, "served with the task", ex)

    other = "tk-conformance-other"
    cases: tuple[tuple[str, str, dict[str, Any]], ...] = (
        ("headers:task-get-name-mismatch", "tasks/get", {}),
        ("headers:task-update-name-mismatch", "tasks/update", {"inputResponses": {}}),
        ("headers:task-cancel-name-mismatch", "tasks/cancel", {}),
    )
    for check, method, extra in cases:
        ex = await c.call(method, {"taskId": task_id, **extra}, headers={spec.H_NAME: other})
        ctx.verdict(check, spec_error_problems(ex, MISMATCH), "-32020/400", ex)

    ex = await ctx.get(task_id, headers={spec.H_NAME: None})
    if ex.result is not None and ex.result.get("taskId") == task_id and ex.status == 200:
        ctx.passed("headers:task-name-missing", "served without Mcp-Name", ex)
    elif not spec_error_problems(ex, MISMATCH):
        ctx.violated(
            "headers:task-name-missing", "refused with -32020 (breaks clients that omit it)", ex
        )
    else:
        ctx.record(
            "headers:task-name-missing",
            "fail",
            f"neither served nor -32020/400: {describe(ex)}",
            ex,
        )

    ex = await c.call("tasks/get", {"taskId": task_id}, headers={spec.H_METHOD: "tasks/cancel"})
    problems = spec_error_problems(ex, MISMATCH)
    after = await ctx.get(task_id)
    status = (after.result or {}).get("status")
    if status == "cancelled":
        problems.append("the task was cancelled anyway")
    ctx.verdict(
        "headers:task-method-mismatch", problems, "-32020/400 and the task still runs", ex, after
    )


def _sample(kind: str) -> Any:
    return {"integer": 3, "number": 3, "boolean": True}.get(kind, "eu-west-1")


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


async def _param_headers(ctx: Context) -> None:
    c = ctx.client
    name = await ctx.need("header_tool", PARAM_CHECKS)
    tools = await ctx.tools()
    if name is None or tools is None:
        return
    tool = tools[name]
    params = header_args(tool)
    if not params:
        ctx.skip_all(PARAM_CHECKS, f"tool {name!r} declares no {spec.X_MCP_HEADER} argument")
        return
    schema = tool.get("inputSchema") or {}
    required = [r for r in schema.get("required", []) if isinstance(r, str)]
    props = schema.get("properties", {})
    chosen = next((a for a, (_, kind) in params.items() if kind == "string"), next(iter(params)))
    args: dict[str, Any] = {
        a: _sample(str((props.get(a) or {}).get("type", "string"))) for a in required
    }
    args[chosen] = _sample(params[chosen][1])
    base = {spec.H_PARAM_PREFIX + params[a][0]: _text(v) for a, v in args.items() if a in params}
    header = spec.H_PARAM_PREFIX + params[chosen][0]
    call = {"name": name, "arguments": args}

    ex = await c.call("tools/call", call, headers={**base, header: None})
    ctx.verdict("headers:param-missing", spec_error_problems(ex, MISMATCH), "-32020/400", ex)
    wrong = "ap-south-9" if isinstance(args[chosen], str) else _text(args[chosen]) + "1"
    ex = await c.call("tools/call", call, headers={**base, header: wrong})
    ctx.verdict("headers:param-mismatch", spec_error_problems(ex, MISMATCH), "-32020/400", ex)
    plain = await c.call("tools/call", call, headers=base)
    encoded = await c.call("tools/call", call, headers={**base, header: b64(_text(args[chosen]))})
    problems = [f"plain: {p}" for p in result_problems(plain)]
    problems += [f"Base64: {p}" for p in result_problems(encoded)]
    ctx.verdict("headers:param-match", problems, "plain and Base64 values served", plain, encoded)


SCENARIO = FunctionScenario("headers", "headers & Base64 names", CHECKS, run)
