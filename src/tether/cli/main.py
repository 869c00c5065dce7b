"""`tether …`: parse, configure logging and settings, dispatch, and turn every failure into one
line on stderr with an exit code (`cli/failures.py`; 2: usage or a bad setting; 1: the command
failed; 130: interrupted). Nothing reaches the user as a traceback unless `--verbose` asks."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from tether.cli import access, dags, failures, keys, links, quiet, server
from tether.cli.errors import INTERRUPTED
from tether.cli.loaded import Loaded, check_directories
from tether.cli.parser import build_parser
from tether.cli.runs import runs
from tether.database_url import existing_database
from tether.runtime.operations.storage_errors import storage_errors
from tether.security import new_token
from tether.settings import Settings, SettingsError


def main(argv: Sequence[str] | None = None) -> int:
    """Run `tether ARGS`; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    known, rest = build_parser().parse_known_args(argv)
    if known.command == "conformance":
        from tether.conformance.cli import main as conformance

        return conformance(rest)
    args = build_parser().parse_args(argv)
    level = quiet.log_level(args.command, args.log_level, args.verbose)
    try:
        logged: Settings | None = Settings.from_env()
    except SettingsError:
        logged = None  # plain logging; the command reports the bad setting itself
    quiet.configure(level, args.verbose, logged)
    loaded = Loaded.of(args)
    try:
        with storage_errors():  # the database's own errors leave as the runtime's
            return _dispatch(args, level, loaded)
    except KeyboardInterrupt:
        print("tether: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:  # noqa: BLE001 — the one place a failure becomes one line
        return failures.report(exc, loaded, verbose=args.verbose)


def _dispatch(args: argparse.Namespace, level: str, loaded: Loaded) -> int:
    if args.command == "tokens" and args.action == "new":
        token, entry = new_token(args.name, args.role, args.tenant)
        print(f"token (give it to the client, shown once): {token}")
        print(f"TETHER_API_TOKENS entry (store this):     {entry}")
        return 0
    settings = Settings.from_env(
        app=getattr(args, "app", None),
        host=getattr(args, "host", None),
        port=getattr(args, "port", None),
        workers=getattr(args, "workers", None),
        dags=getattr(args, "dags", None),
        protocols=getattr(args, "protocols", None),
    )
    loaded.settings = settings
    if args.command in ("audit", "tokens"):
        return access.run(args, settings)
    check_directories(settings, loaded)
    if args.command == "serve":
        return server.serve(args, settings, level, loaded)
    if args.command == "worker":
        return server.worker(settings, loaded)
    if args.command == "migrate":
        return server.with_db(settings, server.run_migrations)
    if args.command == "dags":
        return dags.command(args, settings, loaded)
    if args.command == "keys":
        return keys.handle(args, settings)
    if args.command == "links":
        with existing_database(settings) as dsn:
            return asyncio.run(links.command(args, settings, dsn))
    with existing_database(settings) as dsn:
        return asyncio.run(runs(args, settings, dsn, loaded))
