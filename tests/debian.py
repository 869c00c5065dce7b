"""Debian programs some tests run: nginx (the gateway recipe), PostgreSQL built with TLS (the
embedded one is not) and systemd-analyze (the units). `make test` installs the missing ones
first with scripts/ensure-test-packages; a test run without it does the same on first need.
A test that needs one fails, never skips, when it cannot be installed: a recipe that was not
run must not read as one that passed."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parents[1]
NGINX: Final = Path("/usr/sbin/nginx")
_INSTALL: Final = REPO / "scripts" / "ensure-test-packages"
_LOCK = threading.Lock()


def _install() -> None:
    """Run scripts/ensure-test-packages. Raises RuntimeError with its output when it fails."""
    with _LOCK:
        done = subprocess.run(
            [str(_INSTALL)], capture_output=True, text=True, timeout=900, check=False
        )
    if done.returncode != 0:
        raise RuntimeError(f"{_INSTALL.name} failed: {done.stdout}{done.stderr}")


def postgres_bin() -> Path | None:
    """The newest Debian PostgreSQL's bin directory, if one is installed."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return found[-1].parent if found else None


def ensure_nginx() -> Path:
    """Debian's nginx, installed first if missing. Raises RuntimeError when it cannot be."""
    if not NGINX.exists():
        _install()
    if not NGINX.exists():
        raise RuntimeError(f"{NGINX} is missing after {_INSTALL.name}")
    return NGINX


def ensure_postgres() -> Path:
    """The newest Debian PostgreSQL's bin directory, installed first if missing. Raises
    RuntimeError when it cannot be."""
    found = postgres_bin()
    if found is None:
        _install()
        found = postgres_bin()
    if found is None:
        raise RuntimeError(f"no initdb under /usr/lib/postgresql after {_INSTALL.name}")
    return found


def ensure_systemd_analyze() -> str:
    """systemd-analyze, installed first (Debian's systemd) if missing. Raises RuntimeError
    when it cannot be."""
    found = shutil.which("systemd-analyze")
    if found is None:
        _install()
        found = shutil.which("systemd-analyze")
    if found is None:
        raise RuntimeError(f"systemd-analyze is missing after {_INSTALL.name}")
    return found
