"""`tether dags list|show|validate|start` and `tether runs approve|reject|push-back|complete`:
the DAG commands for people. `cli.py` wires them in (`add_commands`, `add_run_commands`,
`run_dags`, `run_decision`); every decision goes through the one runtime `answer` path.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson

from tether.runtime import errors
from tether.runtime.operations import Operations
from tether.runtime.registry import App
from tether.specs.dag import DagSpecError, load_file

DECISIONS = {
    "approve": "approve",
    "reject": "reject",
    "push-back": "push_back",
    "complete": "complete",
}


def add_commands(subparsers: Any) -> None:
    """Add `tether dags …` to the top-level subparsers."""
    dags = subparsers.add_parser("dags", help="DAG workflows (Dagu YAML)")
    dags.add_argument("--app", default=None, help="module:attr or file.py:attr")
    dags.add_argument("--dags", help="directory of DAG files")
    dags.add_argument("--json", action="store_true")
    sub = dags.add_subparsers(dest="action", required=True)
    sub.add_parser("list")
    sub.add_parser("show").add_argument("name")
    sub.add_parser("validate").add_argument("file")
    start = sub.add_parser("start")
    start.add_argument("name")
    start.add_argument("params", nargs="*", help="positional values and NAME=value")


def add_run_commands(runs_subparsers: Any) -> None:
    """Add `tether runs approve|reject|push-back|complete RUN STEP [KEY=VALUE…]`."""
    for name in DECISIONS:
        cmd = runs_subparsers.add_parser(name, help=f"{name} a waiting DAG step")
        cmd.add_argument("id", help="execution id of the DAG run")
        cmd.add_argument("step", help="step name (a human task: its id)")
        cmd.add_argument("inputs", nargs="*", help="KEY=VALUE (strings)")
        cmd.add_argument("--reason", help="why (reject)")
        cmd.add_argument("--json-inputs", help="a JSON object (typed human-task fields)")


def validate(path: str) -> dict[str, Any]:
    """`dags validate FILE`: {ok, name, steps} or {ok: false, error, field, line}. No DB."""
    try:
        spec = load_file(path)
    except DagSpecError as exc:
        return {"ok": False, "error": str(exc), "field": exc.field, "line": exc.line}
    except OSError as exc:
        return {"ok": False, "error": str(exc)}
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
    reason: str | None = None,
    by: str | None = "cli",
) -> dict[str, Any]:
    """Answer the open approval or human task of `step` (approve / reject / push_back /
    complete). Raises WaitNotOpen (no such open wait), AnswerRejected, ExecutionNotFound."""
    view = await ops.get(run_id)
    kinds = ("human_task",) if decision == "complete" else ("approval", "human_task")
    wait = next(
        (w for w in view.current.waits if w.get("kind") in kinds and w.get("name") == step),
        None,
    )
    if wait is None:
        raise errors.WaitNotOpen(f"run {run_id!r} has no open gate or task at step {step!r}")
    response: dict[str, Any] = {"decision": decision, **inputs}
    if reason is not None:
        response["reason"] = reason
    res = await ops.answer(view.current.id, wait["key"], response, by=by)
    return {"status": res.status, "execution_id": res.execution_id, "key": res.key}


def decision_inputs(pairs: list[str], json_inputs: str | None) -> dict[str, Any]:
    """KEY=VALUE pairs (strings), merged over a JSON object. Raises ValueError."""
    out: dict[str, Any] = {}
    if json_inputs:
        loaded = orjson.loads(json_inputs)
        if not isinstance(loaded, dict):
            raise ValueError("--json-inputs must be a JSON object")
        out.update(loaded)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


async def run_decision(args: argparse.Namespace, ops: Operations) -> dict[str, Any]:
    """The `runs approve|reject|push-back|complete` handler."""
    inputs = decision_inputs(args.inputs, args.json_inputs)
    return await decide(ops, args.id, args.step, DECISIONS[args.action], inputs, reason=args.reason)


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
        raise ValueError("`dags start` needs a database")
    return await start_dag(ops, args.name, args.params)
