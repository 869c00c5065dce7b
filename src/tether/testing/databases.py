"""Databases for tests: one PostgreSQL server per process, one migrated template database on
it, and a fresh copy of the template for every test (copying a template takes tens of
milliseconds; migrating a database from nothing takes far longer).

The server is `TETHER_DATABASE_URL`'s when that is set (the role needs CREATEDB; nothing is
created or dropped there but databases named `tether_tmpl_…` and `t_…`), else an embedded
PostgreSQL (pgserver) started in a temporary directory on first use and stopped by `close`.

Behind a connection pooler, the variables a server reads say so here too:
`TETHER_DATABASE_POOLER=transaction` (or `TETHER_STATEMENT_CACHE_SIZE`) sets the prepared
statements kept per connection to each test database, and `TETHER_LISTEN_DATABASE_URL` names
the same server reached directly: each test database's LISTEN connection goes there, and so
do the creating and dropping of databases (a pooler would hold the template open).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import secrets
import shutil
import tempfile
import threading
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

from tether.runtime import scratch
from tether.testing.errors import translated

T = TypeVar("T")

_POOLER_CACHE: Final = {"none": None, "session": None, "transaction": 0}


@dataclass(frozen=True)
class _Pooling:
    """How the environment says the test server is reached (see the module docstring)."""

    direct_url: str | None = None
    statement_cache_size: int | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> _Pooling:
        """Read TETHER_LISTEN_DATABASE_URL, TETHER_DATABASE_POOLER and
        TETHER_STATEMENT_CACHE_SIZE. Raises ValueError naming a variable whose value does
        not fit."""
        pooler = env.get("TETHER_DATABASE_POOLER") or "none"
        if pooler not in _POOLER_CACHE:
            raise ValueError(f"TETHER_DATABASE_POOLER must be one of {', '.join(_POOLER_CACHE)}")
        cache = _POOLER_CACHE[pooler]
        given = env.get("TETHER_STATEMENT_CACHE_SIZE")
        if given:
            if not given.isdigit():
                raise ValueError("TETHER_STATEMENT_CACHE_SIZE must be a whole number (0 or more)")
            cache = int(given)
        direct = env.get("TETHER_LISTEN_DATABASE_URL") or None
        if pooler == "transaction" and direct is None:
            raise ValueError(
                "TETHER_DATABASE_POOLER=transaction needs TETHER_LISTEN_DATABASE_URL: a "
                "transaction pooler delivers no notifications"
            )
        return cls(direct, cache)

    def route(self, pooled: str, name: str) -> Callable[[], None] | None:
        """Route database `name`, reached at `pooled`, as the environment says; the function
        that removes the route, or None when there is nothing to route."""
        if self.direct_url is None and self.statement_cache_size is None:
            return None
        return scratch.route_database(
            pooled,
            statement_cache_size=self.statement_cache_size,
            listen_dsn=(scratch.with_database(self.direct_url, name) if self.direct_url else None),
        )


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
        self._pooling = _Pooling()
        self._routes: dict[str, Callable[[], None]] = {}  # a database's DSN → its route's removal

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
                pooling = _Pooling()
                url = self._given or os.environ.get("TETHER_DATABASE_URL")
                if url is None:
                    url = self._embed()
                elif self._given is None:
                    pooling = _Pooling.from_env(os.environ)
                name = "tether_tmpl_" + secrets.token_hex(6)
                _run(scratch.create_template(pooling.direct_url or url, name))
            self._url, self._template, self._pooling = url, name, pooling
            remove = pooling.route(url, urlsplit(url).path.lstrip("/"))
            if remove is not None:  # the server's own database, as its test databases
                self._routes[url] = remove

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
        name = "t_" + secrets.token_hex(6)
        with translated():
            await scratch.create_database(self._admin_url, name, template=self.template)
        dsn = scratch.with_database(self.server_url, name)
        remove = self._pooling.route(dsn, name)
        if remove is not None:
            self._routes[dsn] = remove
        return dsn

    @property
    def _admin_url(self) -> str:
        """Where databases are created and dropped: the server reached directly."""
        return self._pooling.direct_url or self.server_url

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
            await scratch.drop_database(self._admin_url, name)
        remove = self._routes.pop(dsn, None)
        if remove is not None:
            remove()

    def close(self) -> None:
        """Drop the template and stop the embedded server (if one was started); a later
        `start` begins afresh. Call it from synchronous code.

        Raises:
            DatabaseUnavailable: the named server cannot be reached to drop the template.
        """
        with self._lock:
            url, template, server, folder = self._url, self._template, self._embedded, self._folder
            self._url = self._template = self._embedded = self._folder = None
            admin = self._pooling.direct_url or url
            self._pooling = _Pooling()
            routes, self._routes = self._routes, {}
        for remove in routes.values():
            remove()
        if admin is not None and template is not None and server is None:
            with translated():
                _run(scratch.drop_database(admin, template))  # an embedded server goes whole
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
