"""`tether …`: parse, configure logging and settings, dispatch, and turn every expected failure
into one line on stderr with an exit code (2: usage or a bad setting; 1: the command failed;
130: interrupted)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from tether.cli import access, dags, keys, quiet, server
from tether.cli.parser import build_parser
from tether.cli.runs import BadArgument, runs
from tether.database_url import NoDatabase, existing_database
from tether.security import new_token
from tether.settings import Settings, SettingsError

INTERRUPTED = 130


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
    try:
        return _dispatch(args, level)
    except (SettingsError, BadArgument) as exc:
        print(f"tether: {exc}", file=sys.stderr)
        return 2
    except (NoDatabase, ValueError) as exc:  # ValueError: the loader's "cannot import APP"
        print(f"tether: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tether: interrupted", file=sys.stderr)
        return INTERRUPTED


def _dispatch(args: argparse.Namespace, level: str) -> int:
    if args.command == "audit" or (args.command == "tokens" and args.action != "new"):
        return access.run(args, Settings.from_env())
    if args.command == "tokens":
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
    if args.command == "serve":
        code = server.serve(args, settings, level)
        if code == INTERRUPTED:
            print("tether: interrupted; stopped", file=sys.stderr)
        return code
    if args.command == "worker":
        return server.worker(settings)
    if args.command == "migrate":
        return server.with_db(settings, server.run_migrations)
    if args.command == "dags":
        return dags.command(args, settings)
    if args.command == "keys":
        return keys.handle(args, settings)
    with existing_database(settings) as dsn:
        return asyncio.run(runs(args, settings, dsn))
