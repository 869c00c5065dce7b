"""`tether dags list|show|validate|start` and `tether runs approve|reject|push-back|complete`:
the DAG commands for people (their parsers are in `cli/parser.py`); every decision goes through
the one runtime `answer` path.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import orjson

from tether.cli.errors import Usage
from tether.cli.loaded import Loaded
from tether.cli.output import Output
from tether.cli.parser import DECISIONS
from tether.database_url import existing_database
from tether.runtime import answers, errors
from tether.runtime.operations import Operations
from tether.runtime.registry import App
from tether.runtime.service import operations
from tether.settings import Settings
from tether.specs.dag import DagSpecError, load_file


def validate(path: str) -> dict[str, Any]:
    """`dags validate FILE`: {ok, name, steps} or {ok: false, error, field, line}. No DB.
    Raises OSError when the file cannot be read."""
    try:
        spec = load_file(path)
    except DagSpecError as exc:
        return {"ok": False, "error": str(exc), "field": exc.field, "line": exc.line}
    return {"ok": True, "name": spec.name, "steps": list(spec.order)}


def list_dags(app: App) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "file": entry.file,
            "description": entry.spec.description,
            "steps": len(entry.spec.steps),
            "labels": [str(label) for label in entry.spec.labels],
            "schedule": [s.expression for s in entry.spec.schedules],
        }
        for name, entry in sorted(app.dags.items())
    ]


def show_dag(app: App, name: str) -> dict[str, Any]:
    """Raises WorkflowNotFound."""
    entry = app.dags.get(name)
    if entry is None:
        raise errors.WorkflowNotFound(f"no DAG named {name!r}")
    spec = entry.spec
    return {
        "name": spec.name,
        "file": entry.file,
        "type": spec.type,
        "params": [
            {"position": p.position, "name": p.name, "default": p.default} for p in spec.params
        ],
        "steps": [{"name": s.name, "depends": list(s.depends)} for s in spec.steps],
        "handlers": sorted(spec.handlers),
        "text": entry.text,
    }


async def start_dag(ops: Operations, name: str, params: list[str]) -> dict[str, Any]:
    if name not in ops.app.dags:
        raise errors.WorkflowNotFound(f"no DAG named {name!r}")
    started = await ops.start(name, {"params": params or None}, by="cli")
    row = started.execution
    return {"id": row.id, "dag_run_id": row.business_id, "status": row.status}


async def decide(
    ops: Operations,
    run_id: str,
    step: str,
    decision: str,
    inputs: dict[str, Any],
    *,
    texts: dict[str, str] | None = None,
    reason: str | None = None,
    by: str | None = "cli",
) -> dict[str, Any]:
    """Answer the open approval or human task of `step` (approve / reject / push_back /
    complete) with `inputs` (JSON values) and `texts` (typed in, each read as its field's
    type). Raises WaitNotOpen (no such open wait), AnswerRejected, ExecutionNotFound."""
    view = await ops.get(run_id)
    kinds = ("human_task",) if decision == "complete" else ("approval", "human_task")
    wait = next(
        (w for w in view.current.waits if w.get("kind") in kinds and w.get("name") == step),
        None,
    )
    if wait is None:
        raise errors.WaitNotOpen(f"run {run_id!r} has no open gate or task at step {step!r}")
    form = answers.Form(decision, values=inputs, texts=texts or {}, reason=reason)
    response = answers.read(form, wait)
    res = await ops.answer(view.current.id, wait["key"], response, by=by)
    return {"status": res.status, "execution_id": res.execution_id, "key": res.key}


def decision_inputs(
    pairs: list[str], json_inputs: str | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """(the JSON object's inputs, the KEY=VALUE pairs' texts); a pair's text is read as its
    field's type when the decision is made, over the JSON object's. Raises Usage."""
    values: dict[str, Any] = {}
    if json_inputs:
        try:
            given = orjson.loads(json_inputs)
        except orjson.JSONDecodeError:
            raise Usage(f"--json-inputs is not JSON: {json_inputs!r}") from None
        if not isinstance(given, dict):
            raise Usage("--json-inputs must be a JSON object")
        values.update(given)
    texts: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise Usage(f"expected KEY=VALUE, got {pair!r}")
        texts[key] = value
    return values, texts


async def run_decision(args: argparse.Namespace, ops: Operations) -> dict[str, Any]:
    """The `runs approve|reject|push-back|complete` handler."""
    values, texts = decision_inputs(args.inputs, args.json_inputs)
    decision = DECISIONS[args.action]
    return await decide(ops, args.id, args.step, decision, values, texts=texts, reason=args.reason)


def prepare_app(app: App, dags_dir: str | None) -> dict[str, str]:
    """Load `--dags DIR` into the app; returns {file: problem} for refused files."""
    return app.load_dags(Path(dags_dir)) if dags_dir else {}


async def run_dags(args: argparse.Namespace, ops: Operations | None, app: App) -> Any:
    """The `dags …` handler; `ops` is needed for `start` only."""
    if args.action == "validate":
        return validate(args.file)
    if args.action == "list":
        return list_dags(app)
    if args.action == "show":
        return show_dag(app, args.name)
    if ops is None:
        raise Usage("`dags start` needs a database")
    return await start_dag(ops, args.name, args.params)


def command(args: argparse.Namespace, settings: Settings, loaded: Loaded) -> int:
    """`tether dags …`: 0, or 1 when `validate` refuses the file (`validate` reads only the
    file: it loads no App and needs no database)."""
    out = Output(args.json)
    if args.action == "validate":
        result: Any = validate(args.file)
    else:
        app = loaded.load(settings, protocols=False)
        if args.action == "start":
            with existing_database(settings) as dsn:
                result = asyncio.run(_start(args, settings, dsn, app))
        else:
            result = asyncio.run(run_dags(args, None, app))
    if out.json or args.action == "show":
        out.data(result)
    elif args.action == "list":
        for dag in result:
            out.console.print(f"{dag['name']}  {dag['steps']} steps  {dag['file']}", markup=False)
    else:
        out.fields(result)
    return 1 if args.action == "validate" and not result["ok"] else 0


async def _start(args: argparse.Namespace, settings: Settings, dsn: str, app: App) -> Any:
    async with operations(
        dsn, app, admission=settings.admission(), encryption=settings.encryption()
    ) as ops:
        return await run_dags(args, ops, app)
