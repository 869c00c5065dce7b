"""The pytest plugin: its fixtures work in a user's suite (pytest-asyncio's default strict
mode, no conftest of ours), `tether_app` must be overridden, the entry point names the plugin
module, and loading the plugin imports no runtime."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]
PLUGIN = "tether.testing.pytest_plugin"

USER_SUITE = """
from datetime import timedelta

import pytest

import tether
import tether.testing

app = tether.App()


@app.workflow
async def nap(ctx: tether.Context) -> str:
    await ctx.sleep(timedelta(days=3))
    return "rested"


@pytest.fixture
def tether_app() -> tether.App:
    return app


@pytest.mark.asyncio
async def test_nap(tether_env: tether.testing.WorkflowEnvironment) -> None:
    run = await tether_env.start("nap")
    assert await tether_env.result(run) == "rested"
"""

NO_APP = """
import pytest


@pytest.mark.asyncio
async def test_forgot_the_app(tether_env) -> None:
    pass
"""


def run_suite(tmp_path: Path, server_url: str, code: str) -> subprocess.CompletedProcess[str]:
    """`code` as a user's test file, run by pytest in a fresh process with only the plugin
    (as the entry point loads it) and TETHER_DATABASE_URL pointing at our test server."""
    (tmp_path / "test_user.py").write_text(code, "utf-8")
    env = {
        **os.environ,
        "TETHER_DATABASE_URL": server_url,
        "PYTHONPATH": str(REPO / "src"),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # only what we name: the plugin and asyncio
    }
    argv = [sys.executable, "-m", "pytest", "-q", "-p", PLUGIN, "-p", "asyncio"]
    argv += ["-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)]
    return subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_users_suite_gets_tether_env_for_its_app(tmp_path: Path, server_url: str) -> None:
    """A user's test overriding `tether_app` gets a running environment from `tether_env`
    (its three-day sleep skipped) in pytest-asyncio's strict mode."""
    proc = run_suite(tmp_path, server_url, USER_SUITE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_tether_env_without_an_app_fixture_says_what_to_define(
    tmp_path: Path, server_url: str
) -> None:
    """Without a `tether_app` fixture the test errors with a message naming it."""
    proc = run_suite(tmp_path, server_url, NO_APP)
    assert proc.returncode != 0
    assert "define it" in proc.stdout and "tether_app" in proc.stdout


def test_the_entry_point_is_named_after_the_plugin_module() -> None:
    """The pytest11 entry point's name is the module's, so a conftest's `pytest_plugins`
    naming the module finds it registered instead of registering it twice (our choice)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["entry-points"]["pytest11"] == {PLUGIN: PLUGIN}


def test_loading_the_plugin_imports_no_runtime() -> None:
    """Every pytest run where Tether is installed loads the plugin: it must stay cheap."""
    code = (
        f"import sys, {PLUGIN}; "
        "sys.exit(1 if any(m.startswith('tether.runtime') for m in sys.modules) else 0)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    assert subprocess.run([sys.executable, "-c", code], env=env, check=False).returncode == 0
