"""The suite runs on the PostgreSQL the environment names: the embedded one (pgserver) by default,
or `TETHER_DATABASE_URL`; `make test-external-pg` also sets TETHER_PG_VERSION, the major version
of the external server it started, which must differ from the embedded one, and runs the
suite through PgBouncer (TETHER_DATABASE_POOLER=transaction)."""

from __future__ import annotations

import os
import re
import subprocess
from urllib.parse import urlsplit

import asyncpg
import pytest

from tests.conftest import direct_url


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
    conn = await asyncpg.connect(direct_url(server_url))
    try:
        major = int(await conn.fetchval("SHOW server_version_num")) // 10000
        port = await conn.fetchval("SELECT inet_server_port()")
    finally:
        await conn.close()
    external = os.environ.get("TETHER_DATABASE_URL")
    if not external:
        assert major == _embedded_major()
        return
    # Through a pooler, the server is the one the direct (LISTEN) URL names.
    direct = os.environ.get("TETHER_LISTEN_DATABASE_URL") or external
    url_port = urlsplit(direct).port
    if url_port is not None and port is not None:
        assert port == url_port
    expected = os.environ.get("TETHER_PG_VERSION")
    if expected:
        assert major == int(expected)
        assert major != _embedded_major()


@pytest.mark.postgres
async def test_through_a_pooler_one_connection_runs_on_whichever_backend_is_free(
    server_url: str,
) -> None:
    """With TETHER_DATABASE_POOLER=transaction the suite goes through the pooler, not to the
    server: a statement runs on whichever backend is free, so a backend another client holds
    in a transaction is not the one the next statement gets (our choice: test as production
    runs; PgBouncer hands out the backend used last first)."""
    if os.environ.get("TETHER_DATABASE_POOLER") != "transaction":
        pytest.skip("the suite runs without a pooler (scripts/external-pg runs it through one)")
    first = await asyncpg.connect(server_url, statement_cache_size=0)
    second = await asyncpg.connect(server_url, statement_cache_size=0)
    try:
        before = await first.fetchval("SELECT pg_backend_pid()")
        async with second.transaction():
            held = await second.fetchval("SELECT pg_backend_pid()")
            after = await first.fetchval("SELECT pg_backend_pid()")
        port = await first.fetchval("SELECT inet_server_port()")
    finally:
        await first.close()
        await second.close()
    assert port != urlsplit(server_url).port
    assert held == before != after
