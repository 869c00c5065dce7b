"""Our harness against Tether's conformance fixtures (`tether.testing.conformance:app`) over a
real socket, through `tether conformance … --strict`: every check passes or is skipped with
a reason that is about the fixtures, never about Tether."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.e2e.conftest import ServeFn
from tether import cli
from tether.testing import conformance

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.conformance]

#: The only checks that may skip against Tether's fixture app, and why.
SKIPS = {
    # The fixture app advertises prompts, resources and completions: nothing left to probe.
    "routing:unadvertised-capability",
    # The fixtures keep ended runs for an hour (ttlMs ≈ 3.6e6), beyond any test's patience.
    "ttl:purged-invalid-params",
}


async def test_every_check_passes_against_tether_over_a_socket(
    mcp_server: ServeFn, tmp_path: Path
) -> None:
    """The harness runs against Tether with zero failures, even with --strict."""
    report, junit = tmp_path / "report.json", tmp_path / "report.xml"
    async with mcp_server(conformance.app) as url:
        args = ["conformance", "--url", url, "--strict", "--json", str(report)]
        code = await asyncio.to_thread(cli.main, [*args, "--junit", str(junit)])
    data = json.loads(report.read_text(encoding="utf-8"))
    verdicts = {c["id"]: (c["status"], c["message"]) for c in data["checks"]}
    assert {k: v for k, v in verdicts.items() if v[0] != "pass" and k not in SKIPS} == {}
    assert {k for k, v in verdicts.items() if v[0] == "skip"} == SKIPS
    assert code == 0
    assert junit.read_text(encoding="utf-8").count("<testcase ") == len(verdicts)
