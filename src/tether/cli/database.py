"""Which database the short commands talk to; they never create one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tether.database_url import database_url
from tether.settings import Settings
from tether.storage import embedded


class NoDatabase(Exception):
    """No database to talk to: the message names the directory looked in and what to do."""


@contextlib.contextmanager
def existing_database(settings: Settings) -> Iterator[str]:
    """Yield a DSN for TETHER_DATABASE_URL, or for the embedded database `tether serve` made
    under TETHER_DATA_DIR (started if it is not running, stopped again afterwards).

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
