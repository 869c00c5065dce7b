"""`tether runs …`: inspect and steer runs through the runtime's Operations."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from tether.cli import access, batch, dags, render
from tether.cli.errors import Usage
from tether.cli.loaded import Loaded
from tether.cli.output import Output
from tether.cli.parser import DECISIONS
from tether.cli.watch import watch
from tether.runtime import answers, audit
from tether.runtime import errors as rt_errors
from tether.runtime.notifications import Listener
from tether.runtime.operations import Operations
from tether.runtime.operations.answering import open_wait
from tether.runtime.rows import ExecutionRow
from tether.runtime.service import operations
from tether.settings import Settings


def json_arg(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise Usage(f"not JSON: {text!r}") from exc


async def runs(args: argparse.Namespace, settings: Settings, dsn: str, loaded: Loaded) -> int:
    """Run one `runs` action; the exit code. Raises TetherError (the CLI reports it)."""
    app = loaded.load(settings)
    out = Output(args.json)
    listener = Listener(dsn) if args.action == "watch" else None
    async with operations(
        dsn,
        app,
        pool_size=2,
        listener=listener,
        admission=settings.admission(),
        encryption=settings.encryption(),
    ) as ops:
        ops = ops.for_principal(access.cli_principal(args.tenant))
        if listener is not None:
            return await watch(ops, listener, args.id, out, until_wait=args.until_wait)
        return await run_action(args, ops, out)


READS = frozenset({"list", "show", "watch"})  # every other `runs` action is audited


async def run_action(args: argparse.Namespace, ops: Operations, out: Output) -> int:
    """Run one `runs` action; a mutation leaves one audit row, refused ones too."""
    if args.action in READS:
        await _act(args, ops, out)
        return 0
    method = f"runs/{args.action}"
    try:
        acted_on = await _act(args, ops, out)
    except rt_errors.TetherError as exc:
        refused = access.cli_entry(
            method, outcome="refused", execution_id=getattr(args, "id", None), tenant=ops.tenant
        )
        await audit.write(ops.pool, [refused])
        raise exc from None
    entry = access.cli_entry(method, execution_id=acted_on, tenant=ops.tenant)
    await audit.write(ops.pool, [entry])
    return 0


async def _act(args: argparse.Namespace, ops: Operations, out: Output) -> str | None:
    """The action; the id of the run it acted on (None for reads)."""
    handler = _ACTIONS.get(args.action)
    if handler is not None:
        return await handler(args, ops, out)
    if args.action in DECISIONS:
        out.fields(await dags.run_decision(args, ops))
        return str(args.id)
    steer = {"cancel": ops.cancel, "terminate": ops.terminate}.get(args.action)
    # `retry`: the run again from the start, under a new business id (handles follow)
    row = await (steer(args.id, by="cli") if steer else ops.again(args.id, by="cli"))
    _row(out, row)
    return row.id


def _row(out: Output, row: ExecutionRow, **extra: Any) -> None:
    if out.json:
        out.data({**render.row_dict(row), **extra})
    else:
        out.show(render.run_detail(row, out.now(), out.fancy))


async def _list(args: argparse.Namespace, ops: Operations, out: Output) -> str | None:
    page = await ops.list_runs(
        workflow=args.workflow,
        statuses=args.status,
        labels=args.label,
        limit=args.limit,
        cursor=args.cursor,
    )
    if out.json:
        items = [render.row_dict(r) for r in page.items]
        out.data({"items": items, "next_cursor": page.next_cursor})
        return None
    out.show(render.runs_table(page.items, out.now(), out.fancy) if page.items else "no runs")
    if page.next_cursor:
        out.console.print(f"more: --cursor '{page.next_cursor}'", markup=False)
    return None


async def _show(args: argparse.Namespace, ops: Operations, out: Output) -> str | None:
    view = await ops.get(args.id)
    row = view.current
    history = (await ops.history(row.id), await ops.steps(row.id)) if args.history else None
    resolved = args.id if row.id != args.id else None
    if not out.json:
        out.show(render.show(row, out.now(), out.fancy, resolved_from=resolved, history=history))
        return None
    data = render.row_dict(row)
    if resolved:
        data["resolved_from"] = resolved
    if history is not None:
        events, records = history
        data["history"] = [
            {"event_id": h.event_id, "type": h.type, "data": h.data, "at": h.at.isoformat()}
            for h in events
        ]
        data["timeline"] = [
            render.entry_dict(e) for e in render.timeline_lines(row, events, records)
        ]
        steps = render.dag_steps(row, records)
        if steps:
            data["dag_steps"] = [render.dag_step_dict(s) for s in steps]
    out.data(data)
    return None


async def _start(args: argparse.Namespace, ops: Operations, out: Output) -> str | None:
    if args.batch is not None:
        return await _start_batch(args, ops, out)
    if args.workflow is None:
        raise Usage("runs start needs WORKFLOW (or --batch FILE)")
    if args.input is None:  # as a scheduled start or a tool call without arguments
        raw: Any = {} if ops.workflow(args.workflow).takes_input else None
    else:
        raw = json_arg(args.input)
    started = await ops.start(
        args.workflow,
        raw,
        idempotency_key=args.idempotency_key,
        labels=args.label,
        queue=args.queue,
        profile=args.profile,
        by="cli",
    )
    if started.deduped and not out.json:
        out.console.print("already started with that idempotency key:", markup=False)
    _row(out, started.execution, deduped=started.deduped)
    return started.execution.id


async def _start_batch(args: argparse.Namespace, ops: Operations, out: Output) -> str | None:
    """Starts from JSON lines (`cli/batch.py`); exit 1 when any item was refused."""
    if args.workflow is not None:
        raise Usage("--batch takes the workflow from each line, not as an argument")
    try:
        items = batch.parse(batch.read(args.batch))
    except ValueError as exc:
        raise Usage(str(exc)) from exc
    results = await batch.start(ops, items)
    for result in results:
        out.data(result, line=True)
    refused = [r for r in results if "error" in r]
    if refused:
        raise rt_errors.InvalidInput(f"{len(refused)} of {len(results)} starts were refused")
    return None


async def _signal(args: argparse.Namespace, ops: Operations, out: Output) -> str | None:
    res = await ops.signal(args.id, args.name, json_arg(args.payload), by="cli")
    out.fields({"status": res.status, "execution_id": res.execution_id})
    return res.execution_id


async def _answer(args: argparse.Namespace, ops: Operations, out: Output) -> str | None:
    # args.key: the wait's key or its name (the single open wait of that name); the response
    # is text, read against that wait's schema (JSON, or a string where one fits)
    wait = open_wait((await ops.get(args.id)).current, args.key)
    response = answers.read(answers.Text(args.response), wait)
    ans = await ops.answer_wait(args.id, args.key, response, by="cli")
    out.fields({"status": ans.status, "execution_id": ans.execution_id, "key": ans.key})
    return ans.execution_id


async def _resume(args: argparse.Namespace, ops: Operations, out: Output) -> str | None:
    # the run again from a step, keeping the calls recorded before it (handles follow)
    row = await ops.again(args.id, from_step=args.from_step, by="cli")
    _row(out, row)
    return row.id


_ACTIONS: dict[str, Callable[[argparse.Namespace, Operations, Output], Awaitable[str | None]]] = {
    "list": _list,
    "show": _show,
    "start": _start,
    "signal": _signal,
    "answer": _answer,
    "resume": _resume,
}
