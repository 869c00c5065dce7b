"""The user guide builds strictly (`mkdocs build --strict`: no broken link, no page outside the
nav, no warning), offline, and its CLI and settings reference is generated from the code."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests import repo_scripts
from tests.test_public_api import PUBLIC_PACKAGES, directives
from tether.settings import Settings

REPO = Path(__file__).resolve().parents[1]


def hook() -> ModuleType:
    return repo_scripts.load("docs/hooks/reference.py", "docs_reference")


def test_the_settings_reference_lists_every_setting_with_a_meaning() -> None:
    """Each Settings field appears as TETHER_<NAME> with a description (from the code, or the
    docs' note for fields the code does not describe yet); no note names a field that is gone."""
    ref = hook()
    table = ref.settings_reference()
    for name, field in Settings.model_fields.items():
        (row,) = [r for r in table.splitlines() if r.startswith(f"| `TETHER_{name.upper()}` |")]
        assert row.rstrip(" |").split("|")[-1].strip(), f"{name} has no meaning"
        assert field.description or name in ref.NOTES
    assert set(ref.NOTES) <= set(Settings.model_fields)


def test_the_cli_reference_has_every_command() -> None:
    """Every subcommand of the real parser gets a section with its usage."""
    ref = hook()
    text = ref.cli_reference()
    words = [" ".join(w) for w, _, _ in ref.commands(ref.tether_parser())]
    assert {"tether serve", "tether runs answer", "tether tokens new", "tether conformance"} <= set(
        words
    )
    for command in words:
        assert f"## `{command}`" in text


@pytest.mark.slow
def test_mkdocs_builds_strictly_offline(tmp_path: Path) -> None:
    """`mkdocs build --strict` succeeds with no proxy reachable (nothing is downloaded), the
    generated reference pages hold the code's settings and commands, and the API pages hold
    every object and member their directives name."""
    site = tmp_path / "site"
    dead = "http://127.0.0.1:9"  # discard port: any download attempt fails
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        env={**os.environ, "HTTP_PROXY": dead, "HTTPS_PROXY": dead, "NO_PROXY": ""},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    settings_page = (site / "reference/settings/index.html").read_text("utf-8")
    assert all(f"TETHER_{n.upper()}" in settings_page for n in Settings.model_fields)
    cli_page = (site / "reference/cli/index.html").read_text("utf-8")
    assert "tether runs answer" in cli_page
    assert (site / "reliability/index.html").exists()
    missing = []
    for d in directives():
        page = (site / "api" / d.page.removesuffix(".md") / "index.html").read_text("utf-8")
        names = [d.identifier, *(f"{d.identifier}.{m}" for m in d.options.get("members") or [])]
        if d.identifier in PUBLIC_PACKAGES:
            exported = getattr(importlib.import_module(d.identifier), "__all__", [])
            names += [f"{d.identifier}.{n}" for n in exported]
        missing += [n for n in names if f'id="{n}"' not in page]
    assert missing == []
