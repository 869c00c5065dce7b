"""Forward-only migrations: sql/migrations/NNNN_<verb>_<noun>.sql, applied in order.

Each file runs in its own transaction and is recorded in schema_migrations. A transaction-level
advisory lock serialises concurrent migrators (several `tether serve` starting at once), so a
second run is a no-op.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import asyncpg

from tether.storage.errors import translated

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_LOCK_ID = 0x7E7E_0001


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available() -> list[Migration]:
    """All migration files bundled with the package, in order."""
    folder = resources.files("tether.storage").joinpath("sql/migrations")
    found = []
    for entry in folder.iterdir():
        m = _FILE.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration numbers must run 1..N without gaps, got {versions}")
    return found


async def migrate(conn: asyncpg.Connection) -> list[int]:
    """Apply pending migrations; return the versions applied now (empty when up to date)."""
    applied_now: list[int] = []
    with translated():
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_ID)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
        for mig in available():
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_ID)
                done = await conn.fetchval(
                    "SELECT 1 FROM schema_migrations WHERE version = $1", mig.version
                )
                if done:
                    continue
                await conn.execute(mig.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                    mig.version,
                    mig.name,
                )
                applied_now.append(mig.version)
    return applied_now
