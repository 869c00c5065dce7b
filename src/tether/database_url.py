"""Which PostgreSQL to use: TETHER_DATABASE_URL, or an embedded server under the data dir."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from tether.settings import Settings
from tether.storage import embedded

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def database_url(settings: Settings) -> Iterator[str]:
    """Yield a DSN; an embedded server started here is stopped on exit (also on SIGTERM paths
    that unwind normally — pgserver's own atexit hook does not run then)."""
    if settings.database_url:
        yield settings.database_url
        return
    server = embedded.start(settings.data_dir)
    try:
        yield server.uri
    finally:
        server.stop()


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
