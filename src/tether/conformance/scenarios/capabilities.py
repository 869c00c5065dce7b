"""Capability gates: no task without the extension, `-32021` on `tasks/*` and task-only tools,
legacy task shapes ignored (CHECKLIST F)."""

from __future__ import annotations

import asyncio
from typing import Any

from tether.conformance import spec
from tether.conformance.client import Exchange
from tether.conformance.context import LONG_S, Context
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import (
    describe,
    error_problems,
    is_task_result,
    spec_error_problems,
)

CHECKS = (
    "caps:task-tool-without-ext",
    "caps:required-task-tool",
    "caps:tasks-get-without-ext",
    "caps:tasks-update-without-ext",
    "caps:tasks-cancel-without-ext",
    "caps:gate-before-lookup",
    "caps:legacy-capability-ignored",
    "caps:legacy-task-param-sync",
    "caps:legacy-task-param-no-ext",
    "caps:no-task-for-prompts-resources",
    "caps:listen-without-ext",
    "caps:missing-capability-data",
)
TASK_METHOD_CHECKS = CHECKS[2:5]
MISSING = spec.MISSING_REQUIRED_CLIENT_CAPABILITY
LEGACY_TASK = {"ttl": 60000, "pollInterval": 1000}
ARGS = {"seconds": 1, "label": "no-task"}


def capability_problems(ex: Exchange, wanted: dict[str, Any]) -> list[str]:
    """-32021/400 whose data.requiredCapabilities includes `wanted` (top-level keys)."""
    problems = spec_error_problems(ex, MISSING)
    if problems:
        return problems
    data = (ex.error or {}).get("data")
    required = data.get("requiredCapabilities") if isinstance(data, dict) else None
    if not isinstance(required, dict):
        return [f"data.requiredCapabilities is {required!r}"]
    for key, value in wanted.items():
        if key == "extensions":
            got = (
                (required.get("extensions") or {})
                if isinstance(required.get("extensions"), dict)
                else {}
            )
            for ext, settings in value.items():
                if got.get(ext, "<absent>") != settings:
                    problems.append(
                        f"requiredCapabilities.extensions[{ext}] is {got.get(ext, '<absent>')!r}"
                    )
        elif key not in required:
            problems.append(f"requiredCapabilities lacks {key!r}")
    return problems


def no_task_problems(ex: Exchange, what: str) -> list[str]:
    if is_task_result(ex.result):
        return [f"{what} returned a task: {describe(ex)}"]
    if ex.result is None and ex.error is None:
        return [f"{what}: no JSON-RPC reply ({describe(ex)})"]
    return []


async def run(ctx: Context) -> None:
    await asyncio.gather(_tools(ctx), _task_methods(ctx), _other_methods(ctx))


async def _tools(ctx: Context) -> None:
    c = ctx.client
    slow = await ctx.need("slow_compute", [CHECKS[0], CHECKS[6], CHECKS[8]])
    if slow is not None:
        cases: tuple[tuple[str, Any, dict[str, Any], str], ...] = (
            ("caps:task-tool-without-ext", spec.CAPS_NONE, {}, "M0"),
            ("caps:legacy-capability-ignored", spec.CAPS_LEGACY_TASKS, {}, "a legacy capability"),
            ("caps:legacy-task-param-no-ext", spec.CAPS_NONE, {"task": LEGACY_TASK}, "M0 + task"),
        )
        # Each call may run synchronously for the fixture's one second: send them together.
        exs = await asyncio.gather(
            *(
                c.call("tools/call", {"name": slow, "arguments": ARGS, **extra}, caps=caps)
                for _, caps, extra, _ in cases
            )
        )
        for (check, _, _, what), ex in zip(cases, exs, strict=True):
            problems = no_task_problems(ex, what)
            if ex.error is not None and ex.code != MISSING:
                problems.append(f"expected a sync result or -32021, got {describe(ex)}")
            ctx.verdict(check, problems, "no task (sync result or -32021)", ex)

    failing = await ctx.need("failing_job", [CHECKS[1]])
    if failing is not None:
        ex = await c.call("tools/call", {"name": failing, "arguments": {}}, caps=spec.CAPS_NONE)
        wanted: dict[str, Any] = {"extensions": {spec.TASKS_EXTENSION: {}}}
        ctx.verdict(
            "caps:required-task-tool",
            capability_problems(ex, wanted),
            "-32021/400 naming the extension",
            ex,
        )

    greet = await ctx.need("greet", [CHECKS[7]])
    if greet is not None:
        params = {"name": greet, "arguments": {"name": "legacy"}, "task": LEGACY_TASK}
        ex = await c.call("tools/call", params)
        problems = no_task_problems(ex, "a sync tool with the task param")
        if ex.result is None or not isinstance(ex.result.get("content"), list):
            problems.append(f"expected content, got {describe(ex)}")
        ctx.verdict(
            "caps:legacy-task-param-sync", problems, "served synchronously with content", ex
        )

    needy = await ctx.need("test_missing_capability", [CHECKS[11]])
    if needy is not None:
        ex = await c.call("tools/call", {"name": needy, "arguments": {}}, caps=spec.CAPS_NONE)
        ctx.verdict(
            "caps:missing-capability-data",
            capability_problems(ex, {"sampling": {}}),
            "-32021/400 naming sampling",
            ex,
        )


async def _task_methods(ctx: Context) -> None:
    c = ctx.client
    ex = await c.call("tasks/get", {"taskId": "tk-conformance-unknown"}, caps=spec.CAPS_NONE)
    ctx.verdict(
        "caps:gate-before-lookup", error_problems(ex, MISSING), "-32021 before the lookup", ex
    )

    slow = await ctx.need("slow_compute", TASK_METHOD_CHECKS)
    if slow is None:
        return
    created = await ctx.call_tool(slow, "slow_compute", seconds=LONG_S)
    if created.task_id is None:
        ctx.skip_all(
            TASK_METHOD_CHECKS,
            f"precondition: {slow} created no task ({describe(created.exchange)})",
        )
        return
    tid = created.task_id
    wanted: dict[str, Any] = {"extensions": {spec.TASKS_EXTENSION: {}}}
    ex = await ctx.get(tid, caps=spec.CAPS_NONE)
    ctx.verdict(
        "caps:tasks-get-without-ext",
        capability_problems(ex, wanted),
        "-32021/400 naming the extension",
        ex,
    )
    ex = await c.call("tasks/update", {"taskId": tid, "inputResponses": {}}, caps=spec.CAPS_NONE)
    ctx.verdict("caps:tasks-update-without-ext", spec_error_problems(ex, MISSING), "-32021/400", ex)
    ex = await c.call("tasks/cancel", {"taskId": tid}, caps=spec.CAPS_NONE)
    problems = spec_error_problems(ex, MISSING)
    after = await ctx.get(tid)
    if (after.result or {}).get("status") == "cancelled":
        problems.append("the task was cancelled anyway")
    ctx.verdict(
        "caps:tasks-cancel-without-ext", problems, "-32021/400 and the task still runs", ex, after
    )


async def _other_methods(ctx: Context) -> None:
    c = ctx.client
    discover = await ctx.discover() or {}
    raw_caps = discover.get("capabilities")
    caps: dict[str, Any] = raw_caps if isinstance(raw_caps, dict) else {}
    exs: list[Exchange] = []
    if "prompts" in caps:
        listed = await c.call("prompts/list")
        prompts = (listed.result or {}).get("prompts") or []
        simple = [
            p
            for p in prompts
            if isinstance(p, dict)
            and not any(isinstance(a, dict) and a.get("required") for a in p.get("arguments") or [])
        ]
        if simple:
            exs.append(
                await c.call("prompts/get", {"name": simple[0].get("name"), "arguments": {}})
            )
    if "resources" in caps:
        listed = await c.call("resources/list")
        resources = (listed.result or {}).get("resources") or []
        if resources and isinstance(resources[0], dict):
            exs.append(await c.call("resources/read", {"uri": resources[0].get("uri")}))
    if not exs:
        ctx.skip(
            "caps:no-task-for-prompts-resources",
            "the server serves no argument-free prompt or resource",
        )
    else:
        problems = [p for ex in exs for p in no_task_problems(ex, ex.rpc_method or "?")]
        ctx.verdict("caps:no-task-for-prompts-resources", problems, "never a task", *exs)

    params = {"notifications": {"taskIds": ["tk-conformance-unknown"]}}
    ex = await c.call("subscriptions/listen", params, caps=spec.CAPS_NONE)
    problems = spec_error_problems(ex, MISSING)
    if problems and not spec_error_problems(ex, spec.METHOD_NOT_FOUND):
        problems = []
    ctx.verdict("caps:listen-without-ext", problems, "-32021/400 (or -32601/404)", ex)


SCENARIO = FunctionScenario("capabilities", "capability gates", CHECKS, run)
