"""Which database a command uses, and how: TETHER_DATABASE_URL is reached as the pooler
settings say (no prepared-statement cache behind a transaction pooler, LISTEN at
TETHER_LISTEN_DATABASE_URL) for as long as the command runs."""

from __future__ import annotations

from tether.database_url import database_url
from tether.settings import Settings
from tether.storage import pool

POOLED = "postgresql://tether@pgbouncer.internal:6432/tether"
DIRECT = "postgresql://tether@db.internal:5432/tether"


def test_the_database_url_is_routed_as_the_pooler_settings_say_while_the_block_runs() -> None:
    """Inside the block the URL's connections keep no prepared statements and LISTEN goes to
    the direct URL; afterwards it is reached directly again (our choice)."""
    settings = Settings.from_env(
        {
            "TETHER_DATABASE_URL": POOLED,
            "TETHER_DATABASE_POOLER": "transaction",
            "TETHER_LISTEN_DATABASE_URL": DIRECT,
        }
    )
    with database_url(settings) as dsn:
        assert dsn == POOLED
        assert pool.route_of(POOLED) == pool.Route(statement_cache_size=0, listen_dsn=DIRECT)
    assert pool.route_of(POOLED) == pool.Route()


def test_a_database_url_without_pooler_settings_installs_no_route() -> None:
    """Without pooler settings nothing is installed, so a route someone else installed for the
    URL (a test database's) stays in force (our choice)."""
    theirs = pool.Route(statement_cache_size=0, listen_dsn=DIRECT)
    remove = pool.route(POOLED, theirs)
    try:
        with database_url(Settings.from_env({"TETHER_DATABASE_URL": POOLED})):
            assert pool.route_of(POOLED) is theirs
    finally:
        remove()
