"""`tether tokens create|list|revoke` and `tether audit`: the token store and the audit trail
from the command line; their parsers are in `cli/parser.py`, `run` dispatches.

Every token change is audited (surface `cli`, principal `cli:<OS user>`), refused ones
included; `cli_entry` builds the same row for any other CLI mutation. `cli_principal` is
who the CLI acts as on runs (`by` "cli").
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import re
import secrets
import sys
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TextIO

import orjson

from tether.cli.errors import Usage
from tether.database_url import existing_database
from tether.principal import Principal
from tether.runtime import audit, tokens
from tether.runtime.audit import AuditEntry
from tether.runtime.service import database
from tether.runtime.tokens import TokenExists
from tether.security.tokens import hash_token, new_token
from tether.settings import Settings

_DURATION: Final = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_NAME: Final = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


def parse_when(text: str, *, now: datetime | None = None, future: bool) -> datetime:
    """`30d`, `12h`, `90m`, `1w`, `45s` (from now: ahead when `future`, else back), or an ISO
    8601 date/time (UTC when it names no zone). Raises ValueError."""
    now = now or datetime.now(UTC)
    m = _DURATION.match(text.strip())
    if m:
        delta = timedelta(seconds=int(m[1]) * _UNITS[m[2]])
        return now + delta if future else now - delta
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"not a duration (30d, 12h) or an ISO date: {text!r}") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def cli_principal(tenant: str | None = None) -> Principal:
    """Who the CLI acts as on runs: `cli`, an admin, which sees every tenant's runs, or,
    bound to `tenant` (`--tenant`), only that tenant's."""
    return Principal("cli", "admin", tenant or None)


def cli_entry(
    method: str,
    *,
    outcome: str = "ok",
    execution_id: str | None = None,
    tenant: str | None = None,
    error_code: int | None = None,
) -> AuditEntry:
    """An audit entry for a CLI action by this OS user."""
    return audit.entry(
        principal=f"cli:{getpass.getuser()}",
        surface="cli",
        method=method,
        outcome=outcome,
        execution_id=execution_id,
        tenant=tenant,
        error_code=error_code,
    )


# --- handlers -----------------------------------------------------------------------------------


def run(args: argparse.Namespace, settings: Settings, out: TextIO | None = None) -> int:
    """Run `tokens create|list|revoke` or `audit` against the database `tether serve` uses
    (never created here); the exit code (2: a bad argument, said on stderr, nothing changed;
    1: refused).

    Raises:
        NoDatabase: there is no database to use.
        TetherError: the runtime refused or failed (Unavailable: the database is down).
    """
    out = out or sys.stdout
    try:
        check_arguments(args)
    except Usage as exc:
        print(f"tether: {exc}", file=sys.stderr)
        return exc.exit_code
    with existing_database(settings) as dsn:
        return asyncio.run(_run(args, dsn, out))


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse bad arguments before the database is opened. Raises Usage."""
    try:
        if args.command == "audit":
            if args.limit < 1:
                raise Usage("--limit must be at least 1")
            if args.since:
                parse_when(args.since, future=False)
        elif args.action == "create":
            _create_arguments(args)
    except ValueError as exc:
        raise Usage(str(exc)) from None


async def _run(args: argparse.Namespace, dsn: str, out: TextIO) -> int:
    async with database(dsn) as db:
        if args.command == "audit":
            return await audit_cmd(db, args, out)
        if args.action == "create":
            return await tokens_create(db, args, out)
        if args.action == "list":
            return await tokens_list(db, args, out)
        return await tokens_revoke(db, args, out)


def _create_arguments(args: argparse.Namespace) -> tuple[str, datetime | None]:
    """The new token's name and expiry. Raises ValueError."""
    name = args.name or f"token-{secrets.token_hex(3)}"
    if not _NAME.match(name):
        raise ValueError(f"bad token name {name!r}: 1-64 of letters, digits and _.@-")
    expires = parse_when(args.expires, future=True) if args.expires else None
    if expires is not None and expires <= datetime.now(UTC):
        raise ValueError("--expires is in the past")
    return name, expires


async def tokens_create(db: Any, args: argparse.Namespace, out: TextIO) -> int:
    name, expires = _create_arguments(args)
    secret, _ = new_token(name, args.role)
    try:
        info = await tokens.create(
            db,
            name=name,
            role=args.role,
            tenant=args.tenant,
            digest=hash_token(secret),
            expires_at=expires,
        )
    except TokenExists as exc:
        await audit.write(db, [cli_entry("tokens/create", outcome="refused", tenant=args.tenant)])
        print(f"tether: {exc}", file=sys.stderr)
        return 1
    await audit.write(db, [cli_entry("tokens/create", tenant=args.tenant)])
    if args.json:
        out.write(orjson.dumps({**_token_dict(info), "token": secret}).decode() + "\n")
    else:
        print(f"token (give it to the client, shown once): {secret}", file=out)
        print(f"stored as {info.name!r} ({info.role}", end="", file=out)
        print(f", tenant {info.tenant}" if info.tenant else "", end="", file=out)
        print(f", expires {_iso(info.expires_at)})" if expires else ")", file=out)
    return 0


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when is not None else None


def _token_dict(info: tokens.TokenInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "role": info.role,
        "tenant": info.tenant,
        "created_at": _iso(info.created_at),
        "expires_at": _iso(info.expires_at),
        "revoked_at": _iso(info.revoked_at),
        "last_used_at": _iso(info.last_used_at),
    }


async def tokens_list(db: Any, args: argparse.Namespace, out: TextIO) -> int:
    rows = [_token_dict(t) for t in await tokens.list_all(db, include_revoked=args.all)]
    if args.json:
        out.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    print(f"{'NAME':<20} {'ROLE':<9} {'TENANT':<12} CREATED / EXPIRES / LAST USED", file=out)
    for r in rows:
        times = " / ".join((r[k] or "-")[:19] for k in ("created_at", "expires_at", "last_used_at"))
        revoked = f"  revoked {r['revoked_at'][:19]}" if r["revoked_at"] else ""
        print(f"{r['name']:<20} {r['role']:<9} {r['tenant'] or '-':<12} {times}{revoked}", file=out)
    return 0


async def tokens_revoke(db: Any, args: argparse.Namespace, out: TextIO) -> int:
    revoked = await tokens.revoke(db, args.name)
    outcome = "ok" if revoked else "refused"
    await audit.write(db, [cli_entry("tokens/revoke", outcome=outcome)])
    if not revoked:
        print(f"tether: no live token named {args.name!r}", file=sys.stderr)
        return 1
    print(f"revoked {args.name!r}", file=out)
    return 0


async def audit_cmd(db: Any, args: argparse.Namespace, out: TextIO) -> int:
    rows = await audit.list_entries(
        db,
        since=parse_when(args.since, future=False) if args.since else None,
        principal=args.principal,
        execution_id=args.run,
        limit=args.limit,
    )
    items = [{**vars(r), "at": r.at.isoformat()} for r in rows]
    if args.json:
        out.write(orjson.dumps(items, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    for i in items:
        what = i["method"] + (f" {i['tool']}" if i["tool"] else "")
        code = f" {i['error_code']}" if i["error_code"] is not None else ""
        print(
            f"{i['at'][:23]} {i['surface']:<4} {i['principal']:<16} {what:<32} "
            f"{i['outcome']}{code} {i['execution_id'] or '-'} {i['remote'] or '-'}",
            file=out,
        )
    return 0
