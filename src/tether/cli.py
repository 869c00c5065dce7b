"""`tether serve | worker | migrate | runs … | conformance …`"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import orjson

from tether import gc_tuning
from tether.database_url import database_url
from tether.loader import DEFAULT_APP, load_app
from tether.runtime import errors as rt_errors
from tether.runtime.operations import Operations
from tether.runtime.rows import ExecutionRow
from tether.runtime.service import migrate_database, operations, running
from tether.security import new_token
from tether.settings import Settings

logger = logging.getLogger("tether")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tether", description="Durable work for AI agents.")
    p.add_argument("--log-level", default="INFO")
    sub = p.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="HTTP endpoint and workers in one process")
    serve.add_argument("app", nargs="?", default=DEFAULT_APP, help="module:attr or file.py:attr")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int, help="concurrent runs in this process")
    serve.add_argument("--no-workers", action="store_true", help="serve HTTP only")

    worker = sub.add_parser("worker", help="workers only")
    worker.add_argument("app", nargs="?", default=DEFAULT_APP)
    worker.add_argument("--workers", type=int, help="concurrent runs in this process")

    sub.add_parser("migrate", help="apply database migrations")

    tokens = sub.add_parser("tokens", help="API tokens")
    tsub = tokens.add_subparsers(dest="action", required=True)
    tnew = tsub.add_parser("new", help="make a token; prints it and its TETHER_API_TOKENS entry")
    tnew.add_argument("name")
    tnew.add_argument("role", choices=["reader", "operator", "admin"])

    runs = sub.add_parser("runs", help="inspect and steer runs")
    runs.add_argument("--app", default=DEFAULT_APP)
    runs.add_argument("--json", action="store_true", help="machine-readable output")
    rsub = runs.add_subparsers(dest="action", required=True)
    ls = rsub.add_parser("list")
    ls.add_argument("--workflow")
    ls.add_argument("--status", action="append")
    ls.add_argument("--limit", type=int, default=20)
    ls.add_argument("--cursor")
    show = rsub.add_parser("show")
    show.add_argument("id")
    show.add_argument("--history", action="store_true")
    start = rsub.add_parser("start")
    start.add_argument("workflow")
    start.add_argument("input", nargs="?", default="null", help="JSON")
    start.add_argument("--idempotency-key")
    sig = rsub.add_parser("signal")
    sig.add_argument("id")
    sig.add_argument("name")
    sig.add_argument("payload", nargs="?", default="null", help="JSON")
    ans = rsub.add_parser("answer")
    ans.add_argument("id")
    ans.add_argument("key")
    ans.add_argument("response", help="JSON")
    for name in ("cancel", "terminate", "retry"):
        cmd = rsub.add_parser(name)
        cmd.add_argument("id")

    # Everything after `conformance` goes to the harness's own parser (tether-conformance).
    sub.add_parser(
        "conformance", help="black-box conformance harness (--help for its options)", add_help=False
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    known, rest = _parser().parse_known_args(argv)
    if known.command == "conformance":
        from tether.conformance.cli import main as conformance

        return conformance(rest)
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = Settings.from_env(
        host=getattr(args, "host", None),
        port=getattr(args, "port", None),
        workers=getattr(args, "workers", None),
    )
    try:
        if args.command == "serve":
            return _serve(args, settings)
        if args.command == "worker":
            return _worker(args, settings)
        if args.command == "migrate":
            return _with_db(settings, _migrate)
        if args.command == "tokens":
            token, entry = new_token(args.name, args.role)
            print(f"token (give it to the client, shown once): {token}")
            print(f"TETHER_API_TOKENS entry (store this):     {entry}")
            return 0
        return _with_db(settings, lambda dsn: _runs(args, dsn))
    except ValueError as exc:
        print(f"tether: {exc}", file=sys.stderr)
        return 2


def _with_db(settings: Settings, fn: Callable[[str], Coroutine[Any, Any, int]]) -> int:
    with database_url(settings) as dsn:
        return asyncio.run(fn(dsn))


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from tether.app import create_app

    app = load_app(args.app)
    with database_url(settings) as dsn:
        web = create_app(app, settings, dsn, run_workers=not args.no_workers, tune_gc=True)
        # Keep idle connections longer than clients do (httpx: 5 s), so a client never reuses
        # a connection the server is closing at that instant (a spurious ReadError).
        config = uvicorn.Config(
            web,
            host=settings.host,
            port=settings.port,
            log_level="info",
            lifespan="on",
            timeout_keep_alive=settings.keep_alive_s,
            access_log=settings.access_log,  # costs 8-13 % of tasks/get throughput
        )
        server = uvicorn.Server(config)
        # uvicorn shuts down gracefully on SIGTERM and then raises the signal again; with the
        # default handler that kills the process before the embedded PostgreSQL is stopped.
        signal.signal(signal.SIGTERM, _exit_on_signal)
        try:
            server.run()
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _worker(args: argparse.Namespace, settings: Settings) -> int:
    app = load_app(args.app)

    async def run(dsn: str) -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with running(
            dsn,
            app,
            worker_settings=settings.worker_settings(),
            janitor_interval_s=settings.janitor_interval_s,
            pool_size=settings.pool_size,
        ) as rt:
            logger.info("worker %s running %d workflows", rt.workers[0].owner, len(app.workflows))
            gc_tuning.tune_gc()
            await stop.wait()
        return 0

    return _with_db(settings, run)


async def _migrate(dsn: str) -> int:
    applied = await migrate_database(dsn)
    print(f"applied {applied}" if applied else "up to date")
    return 0


def _row_dict(row: ExecutionRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "workflow": row.workflow,
        "business_id": row.business_id,
        "status": row.status,
        "version": row.version,
        "details": row.details,
        "waits": row.waits,
        "output": row.output,
        "error": row.error,
        "successor_id": row.successor_id,
        "created_at": row.created_at.isoformat(),
        "ended_at": row.ended_at.isoformat() if row.ended_at else None,
    }


def _emit(args: argparse.Namespace, value: Any) -> None:
    if args.json:
        sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    if isinstance(value, dict) and "items" in value:
        for item in value["items"]:
            print(f"{item['id']}  {item['workflow']:<24} {item['status']:<16} {item['created_at']}")
        if value.get("next_cursor"):
            print(f"more: --cursor '{value['next_cursor']}'")
        return
    for key, item in value.items() if isinstance(value, dict) else []:
        print(f"{key}: {orjson.dumps(item).decode() if not isinstance(item, str) else item}")


def _json_arg(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {text!r}") from exc


async def _runs(args: argparse.Namespace, dsn: str) -> int:
    app = load_app(args.app)
    async with operations(dsn, app, pool_size=2) as ops:
        try:
            return await _run_action(args, ops)
        except rt_errors.TetherError as exc:
            print(f"tether: {type(exc).__name__}: {exc.message}", file=sys.stderr)
            return 1


async def _run_action(args: argparse.Namespace, ops: Operations) -> int:
    action = args.action
    if action == "list":
        page = await ops.list_runs(
            workflow=args.workflow, statuses=args.status, limit=args.limit, cursor=args.cursor
        )
        _emit(args, {"items": [_row_dict(r) for r in page.items], "next_cursor": page.next_cursor})
    elif action == "show":
        view = await ops.get(args.id)
        out = _row_dict(view.current)
        if view.current.id != args.id:
            out["resolved_from"] = args.id
        if args.history:
            out["history"] = [
                {"event_id": h.event_id, "type": h.type, "data": h.data, "at": h.at.isoformat()}
                for h in await ops.history(view.current.id)
            ]
        _emit(args, out)
    elif action == "start":
        started = await ops.start(
            args.workflow, _json_arg(args.input), idempotency_key=args.idempotency_key, by="cli"
        )
        _emit(args, {**_row_dict(started.execution), "deduped": started.deduped})
    elif action == "signal":
        res = await ops.signal(args.id, args.name, _json_arg(args.payload), by="cli")
        _emit(args, {"status": res.status, "execution_id": res.execution_id})
    elif action == "answer":
        # args.key: the wait's key or its name (the single open wait of that name)
        ans = await ops.answer_wait(args.id, args.key, _json_arg(args.response), by="cli")
        _emit(args, {"status": ans.status, "execution_id": ans.execution_id, "key": ans.key})
    elif action == "cancel":
        _emit(args, _row_dict(await ops.cancel(args.id, by="cli")))
    elif action == "terminate":
        _emit(args, _row_dict(await ops.terminate(args.id, by="cli")))
    elif action == "retry":
        _emit(args, _row_dict(await ops.retry(args.id, by="cli")))
    return 0
