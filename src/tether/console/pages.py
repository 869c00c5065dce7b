"""The console's pages (GET): runs, a run, its DAG, the inbox, sign-in. Each reads through
the visitor's tenant-scoped operations; a run outside the scope is a 404 like a missing one.

Every read is bounded: a page of runs, a page of a run's timeline (however long its history),
the newest parked runs for the inbox and its count in the nav.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import urlencode

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
from tether.runtime import errors, timeline, votes
from tether.runtime.ids import is_execution_id
from tether.runtime.operations import Operations
from tether.runtime.rows import ExecutionRow, StepRecord
from tether.runtime.statuses import STATUSES
from tether.runtime.timestamps import timestamp
from tether.runtime.watching import answerable_waits

PAGE: Final = 50
INBOX_LIMIT: Final = 200
#: The runs page's filters, as the query string names them (each kept in every page link).
FILTERS: Final = ("q", "status", "workflow", "label", "by", "waiting")


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
    search = request.query_params.get("q", "").strip()
    if is_execution_id(search):  # a whole run id: straight to that run, when it is in scope
        try:
            run = (await ops.get(search, follow_chain=False)).requested
        except errors.ExecutionNotFound:
            pass
        else:
            return redirect(request, v, f"{PREFIX}/runs/{run.id}")
    return await _runs(c, request, v, ops)


def _filters(request: Request) -> dict[str, str]:
    q = request.query_params
    return {k: q.get(k, "").strip()[:200] for k in FILTERS}


def _link(filters: dict[str, str], **more: str) -> str:
    """A runs page URL with these filters (empty ones left out) and `more`."""
    kept = {k: val for k, val in {**filters, **more}.items() if val}
    return f"{PREFIX}/runs" + (f"?{urlencode(kept)}" if kept else "")


async def _runs(c: Console, request: Request, v: Visitor, ops: Operations) -> Response:
    filters = _filters(request)
    cursor = request.query_params.get("cursor", "").strip() or None
    mine = filters["waiting"] == "1"
    status = "waiting" if mine else filters["status"]
    base: dict[str, Any] = {
        "filters": filters,
        "mine": mine,
        "statuses": STATUSES,
        "filtered": any(filters.values()),
        "clear": f"{PREFIX}/runs",
        "inbox_count": await inbox_count(ops, me(v)),
    }
    try:
        page = await ops.list_runs(
            workflow=filters["workflow"] or None,
            statuses=[status] if status else None,
            labels=[filters["label"]] if filters["label"] else None,
            started_by=filters["by"] or None,
            text=filters["q"] or None,
            cursor=cursor,
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
            older=None,
            newest=None,
            notice=exc.message,
            **base,
        )
    voter, roles = me(v), ops.env.approver_roles
    rows = [
        r for r in page.items if not mine or any(_for(voter, w, roles) for w in answerable_waits(r))
    ]
    starters = await ops.starters(rows)
    now = datetime.now(UTC)
    return render(
        c,
        request,
        v,
        "runs.html",
        runs=[_summary(r, starters.get(r.id), now) for r in rows],
        older=_link(filters, cursor=page.next_cursor) if page.next_cursor else None,
        newest=_link(filters) if cursor else None,
        notice=None,
        **base,
    )


def _summary(row: ExecutionRow, by: str | None, now: datetime) -> dict[str, Any]:
    return {
        "row": row,
        "status": views.status(row.status),
        "created": views.stamp(row.created_at),
        "created_iso": views.iso(row.created_at),
        "duration": views.duration(row, now),
        "now": views.breadcrumb(row),
        "by": by,
        "waits": len(answerable_waits(row)),
    }


async def run_context(
    ops: Operations, run_id: str, earlier: timeline.Cursor | None = None
) -> dict[str, Any]:
    """Everything the run page's live parts show, read in a bounded number of queries of
    bounded size: the run, one page of its timeline (`earlier`: the page before that cursor,
    else the newest), and for a DAG run its steps (as many as its DAG has). Raises
    ExecutionNotFound."""
    view = await ops.get(run_id)
    row = view.requested
    before_event = earlier.event_id if earlier else None
    before_seq = earlier.seq if earlier else None
    limit = timeline.PAGE
    history = ops.history_page(row.id, before=before_event, limit=limit + 1)
    dag: views.DagView | None = None
    records: list[StepRecord]
    if row.workflow in ops.app.dags:  # its graph needs every record (as many as its DAG has)
        events, every = await asyncio.gather(history, ops.steps(row.id))
        dag = views.dag_view(row, every)
        records = [r for r in every if before_seq is None or r.seq < before_seq][-(limit + 1) :]
    else:
        steps = ops.steps_page(row.id, before=before_seq, limit=limit + 1)
        events, records = await asyncio.gather(history, steps)
    shown = timeline.page(row, events, records, limit, earlier)
    current = view.current
    now = datetime.now(UTC)
    return {
        "row": row,
        "current": current,
        "chain": view.chain,
        "status": views.status(row.status),
        "dag_status": views.status(dag.detail.status_label) if dag else None,
        "dag": dag,
        "status_of": views.status,
        "timeline": shown,
        "earlier": earlier,
        "pretty": views.pretty,
        "steps": views.step_rows(dag.detail) if dag else [],
        "is_dag": dag is not None,
        "output": views.pretty(row.output),
        "error": views.pretty(row.error),
        "input": views.pretty(row.input),
        "breadcrumb": views.breadcrumb(current),
        "duration": views.duration(row, now),
        "waits": [forms.wait_form(w) for w in answerable_waits(current)],
        "wait_keys": " ".join(str(w["key"]) for w in answerable_waits(current)),
        "stamp": views.stamp,
        "iso": views.iso,
    }


async def run_page(request: Request) -> Response:
    c = console_of(request)
    v = visitor(c, request)
    if v.principal is None:
        return sign_in_redirect(request, v)
    run_id = request.path_params["run_id"]
    ops = scoped_ops(c, v)
    earlier = timeline.Cursor.parse(request.query_params.get("earlier"))
    try:
        ctx = await run_context(ops, run_id, earlier)
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
        **await page_extras(ops, ctx["row"], me(v)),
        values={},
        problems={},
        stale=None,
    )


async def page_extras(ops: Operations, row: ExecutionRow, voter: str | None) -> dict[str, Any]:
    """What the run page shows besides its live parts: who started the run, the inbox count."""
    starters, count = await asyncio.gather(ops.starters([row]), inbox_count(ops, voter))
    return {"started_by": starters.get(row.id), "inbox_count": count}


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
    count = await inbox_count(ops, me(v))
    return render(
        c, request, v, "dag.html", row=row, dag=dag, status=views.status, inbox_count=count
    )


@dataclass(frozen=True)
class InboxItem:
    row: ExecutionRow
    form: forms.WaitForm
    opened: datetime | None


def me(v: Visitor) -> str | None:
    """The name the visitor answers and votes under (None: nobody is signed in)."""
    return v.principal.name if v.principal is not None else None


def _for(voter: str | None, wait: dict[str, Any], roles: Mapping[str, frozenset[str]]) -> bool:
    """Whether `voter` may decide `wait`: any wait of their tenant, but an approval decided by
    votes only when they are among its approvers (by name or role)."""
    policy = votes.policy_of(wait)
    if policy is None or voter is None:
        return True
    name = str(wait.get("name", ""))
    return votes.refusal(policy, name, voter, "reject", starter=None, roles=roles) is None


async def _inbox_items(ops: Operations, voter: str | None) -> tuple[list[InboxItem], bool]:
    """The open waits the caller may answer (its tenant's: the operations are scoped; an
    approval decided by votes only when the caller is among its approvers), newest first, from
    the newest `INBOX_LIMIT` parked runs; and whether more runs are parked."""
    page = await ops.list_runs(statuses=["waiting"], limit=INBOX_LIMIT)
    roles = ops.env.approver_roles
    items = [
        InboxItem(r, forms.wait_form(w), timestamp(w.get("opened_at")))
        for r in page.items
        for w in answerable_waits(r)
        if _for(voter, w, roles)
    ]
    items.sort(key=lambda i: i.opened or i.row.created_at, reverse=True)
    return items, page.next_cursor is not None


async def inbox_count(ops: Operations, voter: str | None) -> str:
    """The nav's inbox count: the open waits the caller may answer (`200+` past the cap)."""
    items, more = await _inbox_items(ops, voter)
    return f"{len(items)}+" if more else str(len(items))


async def inbox_context(ops: Operations, voter: str | None) -> dict[str, Any]:
    items, more = await _inbox_items(ops, voter)
    starters = await ops.starters(list({i.row.id: i.row for i in items}.values()))
    now = datetime.now(UTC)
    return {
        "items": [
            {
                "row": i.row,
                "form": i.form,
                "by": starters.get(i.row.id),
                "opened": views.stamp(i.opened),
                "opened_iso": views.iso(i.opened),
                "waiting_for": timeline.span((now - i.opened).total_seconds()) if i.opened else "",
            }
            for i in items
        ],
        "keys": " ".join(i.form.key for i in items),
        "inbox_count": f"{len(items)}+" if more else str(len(items)),
    }


async def inbox_page(request: Request) -> Response:
    c = console_of(request)
    v = visitor(c, request)
    if v.principal is None:
        return sign_in_redirect(request, v)
    ctx = await inbox_context(scoped_ops(c, v), me(v))
    return render(c, request, v, "inbox.html", **ctx, values={}, problems={}, stale=None)


async def sign_in_page(request: Request) -> Response:
    c = console_of(request)
    v = visitor(c, request)
    nxt = request.query_params.get("next", "")
    return render(c, request, v, "sign_in.html", next=nxt, error=None, required=c.auth.required)


async def home(request: Request) -> Response:
    c = console_of(request)
    return redirect(request, visitor(c, request), f"{PREFIX}/runs")
