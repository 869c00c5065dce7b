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
