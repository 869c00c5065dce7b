"""Which PostgreSQL to use: TETHER_DATABASE_URL, or an embedded server under the data dir."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import NamedTuple
from urllib.parse import urlsplit

from tether.settings import Settings
from tether.storage import embedded, pool

logger = logging.getLogger(__name__)


class Started(NamedTuple):
    """A database to use: its DSN, and how to let go of it (stops an embedded server this
    process started once no other process uses it; for TETHER_DATABASE_URL, removes its
    route)."""

    dsn: str
    stop: Callable[[], None]


def start(settings: Settings) -> Started:
    """The DSN of TETHER_DATABASE_URL, or of the embedded server under TETHER_DATA_DIR,
    started (or created) here. Until `stop`, this process connects to TETHER_DATABASE_URL as
    the settings say: without the prepared-statement cache behind a transaction pooler
    (TETHER_DATABASE_POOLER, TETHER_STATEMENT_CACHE_SIZE), and LISTENing at
    TETHER_LISTEN_DATABASE_URL when it is set. Raises DatabaseUnavailable when the embedded
    server does not start."""
    if settings.database_url:
        remove = pool.route_as(
            settings.database_url,
            statement_cache_size=settings.statement_cache(),
            listen_dsn=settings.listen_database_url,
        )
        return Started(settings.database_url, remove)
    server = embedded.start(settings.data_dir)
    return Started(server.uri, server.stop)


@contextlib.contextmanager
def database_url(settings: Settings) -> Iterator[str]:
    """Yield a DSN; an embedded server started here is stopped on exit (also on SIGTERM paths
    that unwind normally — pgserver's own atexit hook does not run then)."""
    started = start(settings)
    try:
        yield started.dsn
    finally:
        started.stop()


def describe(settings: Settings) -> str:
    """Where the database is, for messages: the URL's hosts and database name (never its user
    or password), or the embedded server's directory."""
    if settings.database_url:
        # Settings checked the URL: a password holding an unescaped '/', '?' or '#' (which
        # would move part of it past the host) leaves a port that is not a number, refused.
        parts = urlsplit(settings.database_url)
        hosts = parts.netloc.rpartition("@")[2] or "the local socket"
        name = parts.path.lstrip("/")
        database = f", database {name}" if name else ""
        return f"PostgreSQL at {hosts}{database} (TETHER_DATABASE_URL)"
    return f"the embedded PostgreSQL in {embedded.pgdata_dir(settings.data_dir)} (TETHER_DATA_DIR)"


class NoDatabase(Exception):
    """No database to talk to: the message names the directory looked in and what to do."""


@contextlib.contextmanager
def existing_database(settings: Settings) -> Iterator[str]:
    """Yield a DSN for TETHER_DATABASE_URL, or for the embedded database `tether serve` made
    under TETHER_DATA_DIR (started if it is not running, stopped again afterwards). The short
    commands (`tether runs …`) use this: they never create a database.

    Raises:
        NoDatabase: no TETHER_DATABASE_URL and no embedded database under the data directory.
    """
    if not settings.database_url and not embedded.exists(settings.data_dir):
        raise NoDatabase(
            f"no Tether database in {embedded.pgdata_dir(settings.data_dir)}: run "
            "`tether serve` in this directory first, or set TETHER_DATA_DIR to the directory "
            "it uses, or TETHER_DATABASE_URL"
        )
    with database_url(settings) as dsn:
        yield dsn
