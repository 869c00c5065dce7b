"""Databases for tests: one PostgreSQL server per process, one migrated template database on
it, and a fresh copy of the template for every test (copying a template takes tens of
milliseconds; migrating a database from nothing takes far longer).

The server is `TETHER_DATABASE_URL`'s when that is set (the role needs CREATEDB; nothing is
created or dropped there but databases named `tether_tmpl_…` and `t_…`), else an embedded
PostgreSQL (pgserver) started in a temporary directory on first use and stopped by `close`.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import secrets
import shutil
import tempfile
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from tether.runtime import scratch
from tether.testing.errors import translated

T = TypeVar("T")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to the end from synchronous code (a thread without a running loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise RuntimeError("called from async code: use the `a…` method (`await astart()`)")


class Databases:
    """A PostgreSQL server for tests, a migrated template on it, and fresh copies of it.

    Nothing starts until `start` (or `astart`, or the first `create`). Thread-safe.

    Args:
        server_url: the server to create databases on. None: `TETHER_DATABASE_URL` when it
            is set, else an embedded server in a temporary directory.
    """

    def __init__(self, server_url: str | None = None) -> None:
        self._given = server_url
        self._lock = threading.Lock()
        self._url: str | None = None
        self._template: str | None = None
        self._embedded: scratch.EmbeddedServer | None = None
        self._folder: Path | None = None

    @property
    def server_url(self) -> str:
        """The server's DSN (its maintenance database); starts the server if needed."""
        self.start()
        assert self._url is not None  # noqa: S101 — start() sets it
        return self._url

    @property
    def template(self) -> str:
        """The migrated template database's name; starts the server if needed."""
        self.start()
        assert self._template is not None  # noqa: S101 — start() sets it
        return self._template

    def start(self) -> None:
        """Start the server (unless one was named) and build the template; a no-op once done.
        Blocks while it works; in async code use `astart`.

        Raises:
            RuntimeError: called from a thread whose event loop is running.
            DatabaseUnavailable: the server did not start, or cannot be reached.
        """
        with self._lock:
            if self._template is not None:
                return
            with translated():
                url = self._given or os.environ.get("TETHER_DATABASE_URL") or self._embed()
                name = "tether_tmpl_" + secrets.token_hex(6)
                _run(scratch.create_template(url, name))
            self._url, self._template = url, name

    async def astart(self) -> None:
        """`start`, in a thread, so the event loop goes on meanwhile.

        Raises:
            DatabaseUnavailable: the server did not start, or cannot be reached.
        """
        if self._template is None:
            await asyncio.to_thread(self.start)

    def _embed(self) -> str:
        # A short path: PostgreSQL's unix socket lives in the data directory (~107 bytes).
        self._folder = Path(tempfile.mkdtemp(prefix="tpg", dir="/tmp"))
        # pgserver runs PostgreSQL as another user when we are root: it must reach the folder.
        os.chmod(self._folder, 0o755)  # noqa: S103 — a throwaway directory of test databases
        self._embedded = scratch.start_embedded(self._folder)
        return self._embedded.uri

    async def create(self) -> str:
        """Create a database, a copy of the template (`drop` it when done).

        Returns:
            The new database's DSN.

        Raises:
            DatabaseUnavailable: the server cannot be reached, or refused.
        """
        await self.astart()
        with translated():
            return await scratch.create_database(
                self.server_url, "t_" + secrets.token_hex(6), template=self.template
            )

    async def drop(self, dsn: str) -> None:
        """Drop a database `create` made (its connections are closed first).

        Args:
            dsn: the DSN `create` returned.

        Raises:
            ValueError: `dsn` names a database `create` does not make.
            DatabaseUnavailable: the server cannot be reached, or refused.
        """
        name = urlsplit(dsn).path.lstrip("/")
        if not name.startswith("t_"):
            raise ValueError(f"{name!r} is not a database Databases.create made")
        with translated():
            await scratch.drop_database(self.server_url, name)

    def close(self) -> None:
        """Drop the template and stop the embedded server (if one was started); a later
        `start` begins afresh. Call it from synchronous code.

        Raises:
            DatabaseUnavailable: the named server cannot be reached to drop the template.
        """
        with self._lock:
            url, template, server, folder = self._url, self._template, self._embedded, self._folder
            self._url = self._template = self._embedded = self._folder = None
        if url is not None and template is not None and server is None:
            with translated():
                _run(scratch.drop_database(url, template))  # an embedded server goes whole
        if server is not None:
            server.stop()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


_shared: Databases | None = None
_shared_lock = threading.Lock()


def shared() -> Databases:
    """This process's Databases (one server, one template), made on first use and closed when
    the process exits; the pytest plugin's `tether_databases` closes it at the session's end."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Databases()
            atexit.register(_shared.close)
        return _shared
