"""The official MCP conformance suite (@modelcontextprotocol/conformance 0.2.0-alpha.12) against
Tether's fixture app: every tasks-* scenario, the 2026-07-28 requirement set, and the SEP-2243
header scenarios must pass with no expected-failures file (scripts/official-conformance)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.conformance,
    pytest.mark.upstream(
        "The official suite runs at the version tests/node/package-lock.json pins. If that lock "
        "changed (`make lock`), the suite's scenarios may have changed: run "
        "scripts/official-conformance SCENARIO for each failing one, check what it asks against "
        "the spec, and fix the server (or keep the previous suite version in the lock until it "
        "is fixed). If the lock did not change, the server did."
    ),
]

REPO = Path(__file__).resolve().parents[2]


def test_the_official_conformance_suite_passes_every_scenario() -> None:
    """Spec: the official suite is the judge of conformance; 49 scenarios."""
    proc = subprocess.run(
        ["/bin/bash", str(REPO / "scripts" / "official-conformance")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHON": os.environ.get("PYTHON", str(REPO / ".venv/bin/python"))},
        check=False,
    )
    tail = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 0, tail
    assert "official conformance: all scenarios passed" in proc.stdout, tail
