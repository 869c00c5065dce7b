"""`tether serve` on the embedded default: it starts PostgreSQL under the data directory,
serves, and on SIGTERM shuts down gracefully and stops that PostgreSQL (pgserver's own atexit
hook does not run on SIGTERM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.e2e.conftest import free_port
from tests.waiting import healthy

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _postgres_running(data_dir: Path) -> bool:
    pid_file = data_dir / "pg" / "postmaster.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text("utf-8").splitlines()[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


DATABASE_VARIABLES = frozenset(
    {
        "TETHER_DATABASE_URL",
        "TETHER_LISTEN_DATABASE_URL",
        "TETHER_DATABASE_POOLER",
        "TETHER_STATEMENT_CACHE_SIZE",
    }
)


def test_serve_on_the_embedded_default_stops_its_postgres_on_sigterm() -> None:
    """Start, answer /healthz, SIGTERM: exit cleanly and leave no PostgreSQL behind."""
    data_dir = Path(tempfile.mkdtemp(prefix="te", dir="/tmp"))
    port = free_port()
    # The embedded default: no database URL, nor the pooler settings that go with one.
    env = {k: v for k, v in os.environ.items() if k not in DATABASE_VARIABLES}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tether", "--log-level", "WARNING", "serve", "--port", str(port)],
        cwd=REPO,
        env={**env, "TETHER_DATA_DIR": str(data_dir)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        healthy(proc, port, timeout=90)
        assert _postgres_running(data_dir)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
        assert not _postgres_running(data_dir)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
