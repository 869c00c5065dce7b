"""`tasks/get`: the task shape for each status, stability, unknown ids (CHECKLIST H)."""

from __future__ import annotations

import asyncio
from typing import Any

from tether.conformance import spec
from tether.conformance.client import Exchange
from tether.conformance.context import LONG_S, Context, Created
from tether.conformance.scenario import FunctionScenario
from tether.conformance.scenarios._common import describe, error_problems, is_int, timestamp

CHECKS = (
    "get:working-shape",
    "get:working-no-payload",
    "get:unknown-id",
    "get:unknown-id-http-200",
    "get:completed-result",
    "get:terminal-stable",
    "get:readable-after-end",
    "get:no-related-task-meta",
    "get:timestamps-ordered",
    "get:tool-error-completed",
    "get:failed-error",
    "get:failed-status-message",
    "get:input-required-shape",
    "get:input-snapshot-stable",
    "get:missing-task-id",
)
COMPLETED_CHECKS = CHECKS[4:9]
STABLE_POLLS = 5


def _content(result: Any) -> Any:
    return result.get("content") if isinstance(result, dict) else None


async def run(ctx: Context) -> None:
    await _unknown(ctx)
    slow = await ctx.need("slow_compute", CHECKS[:2] + COMPLETED_CHECKS)
    failing = await ctx.need("failing_job", CHECKS[9:10])
    broken = await ctx.need("protocol_error_job", CHECKS[10:12])
    confirm = await ctx.need("confirm_delete", CHECKS[12:14])
    jobs = []
    if slow is not None:
        jobs += [_working(ctx, slow), _completed(ctx, slow)]
    if failing is not None:
        jobs.append(_tool_error(ctx, failing))
    if broken is not None:
        jobs.append(_failed(ctx, broken))
    if confirm is not None:
        jobs.append(_input(ctx, confirm))
    await asyncio.gather(*jobs)


def _created(ctx: Context, created: Created, checks: tuple[str, ...], name: str) -> str | None:
    if created.task_id is None:
        ctx.skip_all(checks, f"precondition: {name} created no task ({describe(created.exchange)})")
    return created.task_id


async def _unknown(ctx: Context) -> None:
    c = ctx.client
    ex = await c.call("tasks/get", {"taskId": "tk-conformance-does-not-exist"})
    ctx.verdict("get:unknown-id", error_problems(ex, spec.INVALID_PARAMS), "-32602", ex)
    if ex.code == spec.INVALID_PARAMS:
        ok = ex.status == 200
        ctx.verdict("get:unknown-id-http-200", [] if ok else [f"HTTP {ex.status}"], "HTTP 200", ex)
    else:
        ctx.skip("get:unknown-id-http-200", "precondition: no -32602 for an unknown task", ex)

    bare = await c.call("tasks/get", {})
    problems = error_problems(bare, spec.INVALID_PARAMS)
    named = await c.call("tasks/get", {}, headers={spec.H_NAME: "tk-conformance-x"})
    if named.code not in (spec.INVALID_PARAMS, spec.HEADER_MISMATCH):
        problems.append(f"with an Mcp-Name header: {describe(named)}")
    ctx.verdict("get:missing-task-id", problems, "an error, never a result", bare, named)


async def _working(ctx: Context, slow: str) -> None:
    created = await ctx.call_tool(slow, "slow_compute", seconds=LONG_S)
    task_id = _created(ctx, created, CHECKS[:2], slow)
    if task_id is None:
        return
    ex = await ctx.get(task_id)
    t = ex.result
    if t is None:
        ctx.violated("get:working-shape", describe(ex), ex)
        ctx.skip("get:working-no-payload", "precondition: tasks/get failed")
        return
    problems = []
    if t.get("resultType") != "complete":
        problems.append(f"resultType is {t.get('resultType')!r}")
    if t.get("taskId") != task_id:
        problems.append(f"taskId is {t.get('taskId')!r}")
    if t.get("status") != "working":
        problems.append(f"status is {t.get('status')!r}, not working")
    problems += [f"no {k!r}" for k in ("createdAt", "lastUpdatedAt", "ttlMs") if k not in t]
    ctx.verdict("get:working-shape", problems, "complete, working, with timestamps and ttlMs", ex)
    extra = [k for k in ("result", "error", "inputRequests") if k in t]
    ctx.verdict(
        "get:working-no-payload", [f"a working task has {extra}"] if extra else [], "no payload", ex
    )


async def _completed(ctx: Context, slow: str) -> None:
    created, sync = await asyncio.gather(
        ctx.call_tool(slow, "slow_compute", seconds=1),
        ctx.call_tool(slow, "slow_compute", caps=spec.CAPS_NONE, seconds=1),
    )
    task_id = _created(ctx, created, COMPLETED_CHECKS, slow)
    if task_id is None:
        return
    polled = await ctx.poll(task_id, spec.TERMINAL)
    done = polled.task
    if not polled.reached or done is None or polled.last is None:
        ctx.skip_all(
            COMPLETED_CHECKS, f"precondition: the task did not end within {ctx.options.timeout:g}s"
        )
        return
    last = polled.last
    problems = [] if done.get("status") == "completed" else [f"status is {done.get('status')!r}"]
    result = done.get("result")
    if not isinstance(result, dict) or not _content(result):
        problems.append(f"result is {result!r}, not a CallToolResult with content")
    elif sync.exchange.result is not None and _content(sync.exchange.result) != _content(result):
        problems.append("its content differs from the synchronous call's")
    ctx.verdict(
        "get:completed-result", problems, "completed with the sync result", last, sync.exchange
    )

    meta = result.get("_meta") if isinstance(result, dict) else None
    related = isinstance(meta, dict) and spec.META_RELATED_TASK in meta
    ctx.verdict(
        "get:no-related-task-meta",
        ["result._meta has related-task"] if related else [],
        "no related-task key",
        last,
    )

    views: list[dict[str, Any]] = [created.result or {}, *polled.seen]
    ctx.verdict(
        "get:timestamps-ordered",
        _timestamp_problems(views),
        "lastUpdatedAt moves with the status",
        last,
    )

    again: list[Exchange] = [await ctx.get(task_id) for _ in range(STABLE_POLLS)]
    changed = [describe(ex) for ex in again if _ending(ex.result) != _ending(done)]
    ctx.verdict("get:terminal-stable", changed[:2], f"{STABLE_POLLS} polls, no change", *again[:2])

    await asyncio.sleep(ctx.options.after_end_s)
    later = await ctx.get(task_id)
    ok = _ending(later.result) == _ending(done)
    ctx.verdict(
        "get:readable-after-end",
        [] if ok else [describe(later)],
        f"readable {ctx.options.after_end_s:g}s later",
        later,
    )


def _ending(task: dict[str, Any] | None) -> tuple[Any, ...]:
    t = task or {}
    return (t.get("taskId"), t.get("status"), t.get("result"), t.get("error"))


def _timestamp_problems(views: list[dict[str, Any]]) -> list[str]:
    problems = []
    previous: dict[str, Any] | None = None
    for view in views:
        created, updated = timestamp(view.get("createdAt")), timestamp(view.get("lastUpdatedAt"))
        if created is None or updated is None:
            problems.append(f"unreadable timestamps in {view.get('status')!r} view")
        elif updated < created:
            problems.append(
                f"lastUpdatedAt {view['lastUpdatedAt']} < createdAt {view['createdAt']}"
            )
        moved = previous is not None and previous.get("status") != view.get("status")
        if moved and previous and previous.get("lastUpdatedAt") == view.get("lastUpdatedAt"):
            problems.append(f"{previous.get('status')} → {view.get('status')} kept lastUpdatedAt")
        previous = view
    return problems[:3]


async def _tool_error(ctx: Context, failing: str) -> None:
    check = "get:tool-error-completed"
    created = await ctx.call_tool(failing, "failing_job")
    task_id = _created(ctx, created, (check,), failing)
    if task_id is None:
        return
    polled = await ctx.poll(task_id, spec.TERMINAL)
    t = polled.task or {}
    problems = [] if t.get("status") == "completed" else [f"status is {t.get('status')!r}"]
    result = t.get("result")
    if not isinstance(result, dict) or result.get("isError") is not True:
        problems.append("result.isError is not true")
    shown = [polled.last] if polled.last else []
    ctx.verdict(
        check,
        problems if polled.reached else [f"not ended: {t.get('status')!r}"],
        "completed with isError",
        *shown,
    )


async def _failed(ctx: Context, broken: str) -> None:
    created = await ctx.call_tool(broken, "protocol_error_job")
    task_id = _created(ctx, created, CHECKS[10:12], broken)
    if task_id is None:
        return
    polled = await ctx.poll(task_id, spec.TERMINAL)
    t = polled.task or {}
    shown = [polled.last] if polled.last else []
    error = t.get("error")
    problems = [] if t.get("status") == "failed" else [f"status is {t.get('status')!r}, not failed"]
    if (
        not isinstance(error, dict)
        or not is_int(error.get("code"))
        or not isinstance(error.get("message"), str)
    ):
        problems.append(f"error is {error!r}")
    if "result" in t:
        problems.append("a failed task has a result")
    ctx.verdict("get:failed-error", problems, "failed with an error object", *shown)
    if t.get("status") != "failed":
        ctx.skip("get:failed-status-message", "precondition: the task did not fail", *shown)
        return
    message = t.get("statusMessage")
    ok = isinstance(message, str) and bool(message)
    ctx.verdict(
        "get:failed-status-message", [] if ok else ["no statusMessage"], "a statusMessage", *shown
    )


async def _input(ctx: Context, confirm: str) -> None:
    created = await ctx.call_tool(confirm, "confirm_delete")
    task_id = _created(ctx, created, CHECKS[12:14], confirm)
    if task_id is None:
        return
    polled = await ctx.poll(task_id, {"input_required", *spec.TERMINAL})
    t = polled.task or {}
    shown = [polled.last] if polled.last else []
    requests = t.get("inputRequests")
    problems = [] if t.get("status") == "input_required" else [f"status is {t.get('status')!r}"]
    if not isinstance(requests, dict) or not requests:
        problems.append(f"inputRequests is {requests!r}")
    else:
        for key, request in requests.items():
            method = request.get("method") if isinstance(request, dict) else None
            if method not in spec.INPUT_METHODS or not isinstance(request.get("params"), dict):
                problems.append(f"request {key!r} is {request!r}")
    ctx.verdict("get:input-required-shape", problems, "input_required with inputRequests", *shown)
    if problems:
        ctx.skip("get:input-snapshot-stable", "precondition: no input_required task")
        return
    again = await ctx.get(task_id)
    same = (again.result or {}).get("inputRequests") == requests
    ctx.verdict(
        "get:input-snapshot-stable",
        [] if same else ["a second poll lists other requests"],
        "identical",
        again,
    )


SCENARIO = FunctionScenario("get", "tasks/get shapes per status", CHECKS, run)
