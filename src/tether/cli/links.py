"""`tether links RUN WAIT --approver NAME …`: approval links for operators to hand to people
(runtime/links.py). Minting is audited (surface `cli`, method `links/mint`), refused ones too:
a link is a credential for one decision."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from tether.cli import access
from tether.cli.errors import Failed, Usage
from tether.cli.output import Output
from tether.runtime import audit, links
from tether.runtime import errors as rt_errors
from tether.runtime.operations.answering import open_wait
from tether.runtime.registry import App
from tether.runtime.service import operations
from tether.settings import Settings


async def command(args: argparse.Namespace, settings: Settings, dsn: str) -> int:
    """Print the links. Raises (exit 1) when the run or wait is not found, or a link is
    refused; Usage (exit 2) for a bad --ttl."""
    minter = settings.link_minter(args.base_url)
    ttl_s = _ttl(args.ttl) if args.ttl else None
    out = Output(args.json)
    # Reading the run needs no workflow code: the wait's descriptor says what it takes.
    async with operations(dsn, App("links"), pool_size=1) as ops:
        ops = ops.for_principal(access.cli_principal(args.tenant))
        run_id: str | None = args.id
        try:
            run = (await ops.get(args.id)).current
            run_id = run.id
            wait = open_wait(run, args.wait)
            if wait is None:
                raise rt_errors.WaitNotOpen(f"no open wait {args.wait!r} on run {run.id}")
            made = _mint(minter, wait, args.approver, args.decision, ttl_s)
        except (rt_errors.TetherError, links.LinkRefused) as exc:
            entry = access.cli_entry("links/mint", outcome="refused", execution_id=run_id)
            await audit.write(ops.pool, [entry])
            if isinstance(exc, links.LinkRefused):
                raise Failed(f"no links: {exc}") from exc
            raise
        await audit.write(ops.pool, [access.cli_entry("links/mint", execution_id=run.id)])
    if out.json:
        out.data(made)
    else:
        for item in made:  # one line each, never wrapped: a URL to copy whole
            out.file.write(f"{item['approver']} {item['decision']}: {item['url']}\n")
        out.file.flush()
    return 0


def _mint(
    minter: links.LinkMinter,
    wait: dict[str, Any],
    approvers: list[str],
    only: list[str] | None,
    ttl_s: float | None,
) -> list[dict[str, Any]]:
    """A link per person and decision (`only`: those decisions). Raises LinkRefused."""
    takes = links.decisions(wait)
    unknown = [d for d in only or () if d not in takes]
    if unknown:
        raise links.LinkRefused(f"the wait takes the decisions {list(takes)}, not {unknown}")
    made = []
    for approver in approvers:
        for decision in only or takes:
            link = minter.mint(wait, approver, decision, ttl_s=ttl_s)
            expires = datetime.fromtimestamp(link.expires, UTC).isoformat()
            made.append(
                {
                    "approver": approver,
                    "decision": decision,
                    "url": minter.url(link),
                    "expires": expires,
                    "key": link.key,
                }
            )
    return made


def _ttl(text: str) -> float:
    try:
        when = access.parse_when(text, future=True)
    except ValueError as exc:
        raise Usage(f"--ttl: {exc}") from None
    seconds = (when - datetime.now(UTC)).total_seconds()
    if not 0 < seconds <= links.MAX_TTL_S:
        raise Usage(f"--ttl: must be more than 0 s and at most {links.MAX_TTL_S:.0f} s")
    return seconds
