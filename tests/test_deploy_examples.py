"""The deployment examples docs/deploying.md shows: the systemd units pass `systemd-analyze
verify` and start commands `tether` accepts, and every TETHER_* variable the page and its
examples name is a setting. (The nginx recipe runs end to end: tests/e2e/test_gateway_nginx.py.)
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.debian import ensure_systemd_analyze
from tether.cli.parser import build_parser
from tether.settings import Settings

DOCS = Path(__file__).resolve().parents[1] / "docs"
UNITS = ("tether.service", "tether-worker.service")
#: The program the units start; the verify check needs it to exist, so it runs the venv's.
UNIT_TETHER = "/opt/tether/bin/tether"


def _exec_start(unit: str) -> list[str]:
    (line,) = [
        ln
        for ln in (DOCS / "examples" / unit).read_text("utf-8").splitlines()
        if ln.startswith("ExecStart=")
    ]
    return shlex.split(line.removeprefix("ExecStart="))


@pytest.mark.parametrize("unit", UNITS)
def test_the_systemd_unit_passes_systemd_analyze_verify(unit: str, tmp_path: Path) -> None:
    """`systemd-analyze verify` reads the unit without a warning (an unknown key or a value it
    cannot parse is a warning, not a failure, so any output fails the test)."""
    analyze = ensure_systemd_analyze()
    tether = Path(sys.executable).with_name("tether")
    assert tether.exists(), tether
    text = (DOCS / "examples" / unit).read_text("utf-8")
    assert text.count(UNIT_TETHER) == 1
    (tmp_path / unit).write_text(text.replace(UNIT_TETHER, str(tether)), encoding="utf-8")
    done = subprocess.run(
        [analyze, "verify", str(tmp_path / unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout + done.stderr == ""


@pytest.mark.parametrize(("unit", "command"), [(UNITS[0], "serve"), (UNITS[1], "worker")])
def test_the_systemd_unit_starts_a_command_tether_accepts(unit: str, command: str) -> None:
    """Each unit's ExecStart is `tether serve` (HTTP only) or `tether worker`, with options
    the command line takes."""
    argv = _exec_start(unit)
    assert argv[0] == UNIT_TETHER
    args = build_parser().parse_args(argv[1:])
    assert args.command == command
    if command == "serve":
        assert args.no_workers


def test_every_variable_the_deployment_page_names_is_a_setting() -> None:
    """A TETHER_* name in docs/deploying.md or an example it includes is a real setting, so a
    renamed or mistyped variable there fails here."""
    texts = [(DOCS / "deploying.md").read_text("utf-8")]
    texts += [
        p.read_text("utf-8")
        for p in (DOCS / "examples").iterdir()
        if p.suffix in {".conf", ".service"}
    ]
    named = set(re.findall(r"TETHER_[A-Z_]+[A-Z]", "\n".join(texts)))
    settings = {f"TETHER_{name.upper()}" for name in Settings.model_fields}
    assert named - settings == set()
