"""The suite runs on the PostgreSQL the environment names: the embedded one (pgserver) by default,
or `TETHER_DATABASE_URL`; `make test-external-pg` also sets TETHER_PG_VERSION, the major version
of the external server it started, which must differ from the embedded one."""

from __future__ import annotations

import os
import re
import subprocess
from urllib.parse import urlsplit

import asyncpg
import pytest


def _embedded_major() -> int:
    from pgserver._commands import POSTGRES_BIN_PATH

    out = subprocess.run(
        [str(POSTGRES_BIN_PATH / "postgres"), "--version"],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    m = re.search(r"\) (\d+)", out)
    assert m, out
    return int(m.group(1))


@pytest.mark.postgres
async def test_the_suite_runs_on_the_postgresql_the_environment_names(server_url: str) -> None:
    """Embedded: its major version. External: the URL's port, and TETHER_PG_VERSION if set."""
    conn = await asyncpg.connect(server_url)
    try:
        major = int(await conn.fetchval("SHOW server_version_num")) // 10000
        port = await conn.fetchval("SELECT inet_server_port()")
    finally:
        await conn.close()
    external = os.environ.get("TETHER_DATABASE_URL")
    if not external:
        assert major == _embedded_major()
        return
    url_port = urlsplit(external).port
    if url_port is not None and port is not None:
        assert port == url_port
    expected = os.environ.get("TETHER_PG_VERSION")
    if expected:
        assert major == int(expected)
        assert major != _embedded_major()
