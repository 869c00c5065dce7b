"""`tether-conformance --url URL …` (also `tether conformance …`): the black-box harness.

Exit status: 0 when every check passed, warned, was skipped or failed as expected; 1 on an
unexpected failure or a stale expected failure; 2 when the server could not be tested.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from tether.conformance import report
from tether.conformance.client import Client
from tether.conformance.context import DEFAULT_FIXTURES, Options
from tether.conformance.requirements import DEFERRED, REQUIREMENTS
from tether.conformance.runner import CannotRun, run
from tether.conformance.scenarios import ALL


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tether-conformance",
        allow_abbrev=False,  # an option is named in full: a prefix could mean another one later
        description="Black-box conformance checks for an MCP 2026-07-28 + Tasks server.",
    )
    p.add_argument("--url", help="the MCP endpoint, e.g. http://127.0.0.1:8000/mcp")
    p.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="ID",
        help="run only this scenario (repeatable)",
    )
    p.add_argument("--list", action="store_true", help="list scenarios and checks, then exit")
    p.add_argument("--json", type=Path, metavar="FILE", help="write a JSON report")
    p.add_argument("--junit", type=Path, metavar="FILE", help="write a JUnit XML report")
    p.add_argument(
        "--expected-failures",
        type=Path,
        metavar="FILE",
        help="YAML list of check ids expected to fail",
    )
    p.add_argument(
        "--fixture",
        action="append",
        default=[],
        metavar="NAME=TOOL",
        help="use TOOL for fixture NAME",
    )
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="K:V",
        help="send this header on every request",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="bound for each request and each wait",
    )
    p.add_argument(
        "--creations",
        type=int,
        default=200,
        metavar="N",
        help="tasks created for the id-entropy check",
    )
    p.add_argument(
        "--strict", action="store_true", help="SHOULD/REC deviations fail instead of warning"
    )
    p.add_argument(
        "--verbose", action="store_true", help="print each check's spec reference and exchanges"
    )
    return p


def _pairs(values: Sequence[str], sep: str, what: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, found, rest = value.partition(sep)
        if not found or not key.strip():
            raise CannotRun(f"bad {what} {value!r}: expected NAME{sep}VALUE")
        out[key.strip()] = rest.strip()
    return out


def _listing() -> str:
    lines = [f"fixtures: {', '.join(DEFAULT_FIXTURES)}"]
    for sc in ALL:
        lines.append(f"{sc.id}: {sc.title}")
        for check_id in sc.checks:
            req = REQUIREMENTS[check_id]
            lines.append(f"  {check_id}  [{req.level}] {req.sentence}")
    lines.append("deferred CHECKLIST items:")
    lines += [f"  {item}: {reason}" for item, reason in DEFERRED.items()]
    return "\n".join(lines) + "\n"


async def _run(args: argparse.Namespace) -> int:
    fixtures = _pairs(args.fixture, "=", "--fixture")
    unknown = sorted(set(fixtures) - set(DEFAULT_FIXTURES))
    if unknown:
        raise CannotRun(
            f"unknown fixture(s) {', '.join(unknown)}; known: {', '.join(DEFAULT_FIXTURES)}"
        )
    headers = _pairs(args.header, ":", "--header")
    expected = (
        report.load_expected_failures(args.expected_failures) if args.expected_failures else {}
    )
    options = Options(
        timeout=args.timeout, strict=args.strict, fixtures=fixtures, creations=args.creations
    )
    client = Client(args.url, headers=headers, timeout=args.timeout)
    try:
        checks = await run(client, options, args.scenario, lambda line: print(line, flush=True))
    finally:
        await client.aclose()
    outcomes = report.apply(checks, expected)
    sys.stdout.write(report.text(outcomes, verbose=args.verbose))
    if args.json:
        args.json.write_text(
            json.dumps(report.to_json(outcomes, args.url), indent=2), encoding="utf-8"
        )
    if args.junit:
        args.junit.write_text(report.junit(outcomes, args.url), encoding="utf-8")
    return report.exit_code(outcomes)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.list:
        sys.stdout.write(_listing())
        return 0
    if not args.url:
        print("tether-conformance: --url is required", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_run(args))
    except (CannotRun, report.ReportError) as exc:
        print(f"tether-conformance: could not run: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 2


if __name__ == "__main__":
    sys.exit(main())
