"""The console's pages (GET): runs, a run, its DAG, the inbox, sign-in. Each reads through
the visitor's tenant-scoped operations; a run outside the scope is a 404 like a missing one.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from tether.console import forms, views
from tether.console.context import (
    PREFIX,
    Console,
    Visitor,
    redirect,
    render,
    scoped_ops,
    sign_in_redirect,
    visitor,
)
from tether.runtime import errors
from tether.runtime.operations import Operations
from tether.runtime.rows import ExecutionRow
from tether.runtime.statuses import STATUSES
from tether.runtime.watching import answerable_waits

PAGE: Final = 50
INBOX_LIMIT: Final = 200


def console_of(request: Request) -> Console:
    c: Console = request.app.state.console
    return c


def not_found(c: Console, request: Request, v: Visitor, what: str) -> Response:
    return render(c, request, v, "not_found.html", 404, what=what)


async def runs_page(request: Request) -> Response:
    c = console_of(request)
    v = visitor(c, request)
    if v.principal is None:
        return sign_in_redirect(request, v)
    ops = scoped_ops(c, v)
    q = request.query_params
    search = q.get("q", "").strip()
    if search:
        try:
            run = (await ops.get(search, follow_chain=False)).requested
        except errors.ExecutionNotFound:
            return await _runs(c, request, v, ops, f"No run with id {search!r}.", 404)
        return redirect(request, v, f"{PREFIX}/runs/{run.id}")
    return await _runs(c, request, v, ops, None, 200)


async def _runs(
    c: Console, request: Request, v: Visitor, ops: Operations, notice: str | None, code: int
) -> Response:
    q = request.query_params
    filters = {k: q.get(k, "").strip() for k in ("workflow", "status", "label", "cursor")}
    mine = q.get("waiting") == "1"
    status = "waiting" if mine else filters["status"]
    try:
        page = await ops.list_runs(
            workflow=filters["workflow"] or None,
            statuses=[status] if status else None,
            labels=[filters["label"]] if filters["label"] else None,
            cursor=filters["cursor"] or None,
            limit=PAGE,
        )
    except errors.InvalidInput as exc:
        return render(
            c,
            request,
            v,
            "runs.html",
            400,
            runs=[],
            next_cursor=None,
            filters=filters,
            mine=mine,
            statuses=STATUSES,
            notice=exc.message,
        )
    rows = [r for r in page.items if not mine or answerable_waits(r)]
    return render(
        c,
        request,
        v,
        "runs.html",
        code,
        runs=[_summary(r) for r in rows],
        next_cursor=page.next_cursor,
        filters=filters,
        mine=mine,
        statuses=STATUSES,
        notice=notice,
    )


def _summary(row: ExecutionRow) -> dict[str, Any]:
    return {
        "row": row,
        "status": views.status(row.status),
        "created": views.stamp(row.created_at),
        "waits": len(answerable_waits(row)),
    }


async def run_context(ops: Operations, run_id: str) -> dict[str, Any]:
    """Everything the run page (and its live part) shows. Raises ExecutionNotFound."""
    view = await ops.get(run_id)
    row = view.requested
    history, records = await asyncio.gather(ops.history(row.id), ops.steps(row.id))
    dag = views.dag_view(row, records)
    current = view.current
    return {
        "row": row,
        "current": current,
        "chain": view.chain,
        "status": views.status(row.status),
        "dag_status": views.status(dag.detail.status_label) if dag else None,
        "timeline": views.timeline(history),
        "steps": views.step_rows(records, dag.detail if dag else None),
        "is_dag": dag is not None,
        "output": views.pretty(row.output),
        "error": views.pretty(row.error),
        "input": views.pretty(row.input),
        "waits": [forms.wait_form(w) for w in answerable_waits(current)],
        "wait_keys": " ".join(str(w["key"]) for w in answerable_waits(current)),
        "stamp": views.stamp,
    }


async def run_page(request: Request) -> Response:
    c = console_of(request)
    v = visitor(c, request)
    if v.principal is None:
        return sign_in_redirect(request, v)
    run_id = request.path_params["run_id"]
    try:
        ctx = await run_context(scoped_ops(c, v), run_id)
    except errors.ExecutionNotFound:
        return not_found(c, request, v, f"run {run_id}")
    notice = request.query_params.get("done")
    return render(
        c,
        request,
        v,
        "run.html",
        notice=_NOTICES.get(notice or ""),
        **ctx,
        values={},
        problems={},
        stale=None,
    )


_NOTICES: Final = {
    "answered": "Answer accepted.",
    "duplicate": "That answer had already been given; nothing changed.",
    "cancel": "Cancellation requested.",
    "retry": "Retry started: this is the new run.",
}


async def dag_page(request: Request) -> Response:
    c = console_of(request)
    v = visitor(c, request)
    if v.principal is None:
        return sign_in_redirect(request, v)
    run_id = request.path_params["run_id"]
    ops = scoped_ops(c, v)
    try:
        row = (await ops.get(run_id, follow_chain=False)).requested
        dag = views.dag_view(row, await ops.steps(row.id))
    except errors.ExecutionNotFound:
        return not_found(c, request, v, f"run {run_id}")
    if dag is None:
        return not_found(c, request, v, f"a DAG for run {run_id} (it is not a DAG run)")
    return render(c, request, v, "dag.html", row=row, dag=dag, status=views.status)


async def inbox_context(ops: Operations) -> dict[str, Any]:
    page = await ops.list_runs(statuses=["waiting"], limit=INBOX_LIMIT)
    items = [(r, forms.wait_form(w)) for r in page.items for w in answerable_waits(r)]
    return {
        "items": [{"row": r, "form": f} for r, f in items],
        "keys": " ".join(f.key for _, f in items),
    }


async def inbox_page(request: Request) -> Response:
    c = console_of(request)
    v = visitor(c, request)
    if v.principal is None:
        return sign_in_redirect(request, v)
    ctx = await inbox_context(scoped_ops(c, v))
    return render(c, request, v, "inbox.html", **ctx, values={}, problems={}, stale=None)


async def sign_in_page(request: Request) -> Response:
    c = console_of(request)
    v = visitor(c, request)
    nxt = request.query_params.get("next", "")
    return render(c, request, v, "sign_in.html", next=nxt, error=None, required=c.auth.required)


async def home(request: Request) -> Response:
    c = console_of(request)
    return redirect(request, visitor(c, request), f"{PREFIX}/runs")
