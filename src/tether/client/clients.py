"""`connect` and `Client`: choose the transport from the target's URL scheme, start runs, and
make handles from stored ids."""

from __future__ import annotations

from collections.abc import Generator
from types import TracebackType
from typing import Any, Final, TypeVar, overload
from urllib.parse import urlsplit

from tether.client.handles import RunHandle, jsonable
from tether.client.transport import Kind, Transport
from tether.runtime.registry import App

T = TypeVar("T")

DATABASE_SCHEMES: Final = frozenset({"postgresql", "postgres"})
HTTP_SCHEMES: Final = frozenset({"http", "https"})


class Client:
    """Starts runs and hands out `RunHandle`s, over the transport `connect` chose. Safe to
    share across tasks of one event loop; close it (`aclose`, or `async with`) when done.

    Args:
        transport: the connection `connect` opened (make clients with `connect`).
    """

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    @property
    def transport(self) -> Kind:
        """`"database"` or `"http"`."""
        return self._transport.kind

    @overload
    async def start(
        self, workflow: str, input: Any = None, *, idempotency_key: str | None = None
    ) -> RunHandle[Any]: ...

    @overload
    async def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        result_type: type[T],
    ) -> RunHandle[T]: ...

    async def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        result_type: Any = None,
    ) -> RunHandle[Any]:
        """Start a run of `workflow`; its handle once the run is stored (a worker picks it
        up; nothing runs in this process).

        Args:
            workflow: the workflow's registered name.
            input: its input: a pydantic model or JSON-like data (None: no input).
            idempotency_key: repeat a start safely: the same key with the same input returns
                the run that holds it, for as long as that run is kept.
            result_type: the type `RunHandle.result()` validates the output into (a pydantic
                model, a dataclass, `dict[str, int]` …); None: the output as JSON data.

        Returns:
            The run's handle.

        Raises:
            WorkflowNotFound: no such workflow (database: not in the App given to `connect`;
                HTTP: the server serves no `start_<workflow>` tool).
            InvalidInput: the workflow refused the input (`.violations`).
            StartConflict: the idempotency key is held by a run with different input.
            NotAuthorized: (HTTP) the token may not start runs.
            TransportError: the database or server cannot be reached.
            TypeError: `input` is not JSON-serialisable.
        """
        run_id = await self._transport.start(
            workflow, jsonable(input, "the input"), idempotency_key=idempotency_key
        )
        return RunHandle(self._transport, run_id, result_type)

    @overload
    def get_handle(self, run_id: str) -> RunHandle[Any]: ...

    @overload
    def get_handle(self, run_id: str, *, result_type: type[T]) -> RunHandle[T]: ...

    def get_handle(self, run_id: str, *, result_type: Any = None) -> RunHandle[Any]:
        """A handle for a run you know the id of. No I/O: a run that does not exist shows up
        as RunNotFound on the handle's first call.

        Args:
            run_id: the run's id (`RunHandle.id` of the handle `start` gave).
            result_type: what `result()` validates the output into (None: the output as is).

        Returns:
            The run's handle.

        Raises:
            ValueError: `run_id` is empty.
        """
        if not run_id:
            raise ValueError("run_id must be a non-empty string")
        return RunHandle(self._transport, run_id, result_type)

    async def aclose(self) -> None:
        """Close the client's connections (handles made from it stop working)."""
        await self._transport.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class Connecting:
    """What `connect` returns: `await` it for a `Client` you close yourself, or use it with
    `async with` to have it closed for you.

    Args:
        target: as for `connect`.
        token: as for `connect`.
        app: as for `connect`.
        timeout: as for `connect`.
        pool_size: as for `connect`.
    """

    def __init__(
        self,
        target: str | None,
        *,
        token: str | None,
        app: App | None,
        timeout: float,
        pool_size: int,
    ) -> None:
        self._target = target
        self._token = token
        self._app = app
        self._timeout = timeout
        self._pool_size = pool_size
        self._client: Client | None = None

    async def open(self) -> Client:
        """Open the connections (what `await` and `async with` do).

        Returns:
            The client, open.

        Raises:
            ValueError: as for `connect`.
            TransportError: as for `connect`.
        """
        from tether.settings import Settings  # reads TETHER_*: only when a client opens

        target = self._target
        settings: Settings | None = None
        if target is None:
            settings = Settings.from_env()
            if not settings.database_url:
                raise ValueError(
                    "no target: pass a postgresql:// or http(s):// URL, or set TETHER_DATABASE_URL"
                )
            target = settings.database_url
        scheme = urlsplit(target).scheme.lower()
        if scheme in HTTP_SCHEMES:
            from tether.client.http import HttpTransport

            return Client(HttpTransport(target, token=self._token, timeout=self._timeout))
        if scheme in DATABASE_SCHEMES:
            if self._token is not None:
                raise ValueError(
                    "token is for a server (http:// or https://); a database URL carries its "
                    "own credentials"
                )
            from tether.client.database import open_database

            transport = await open_database(
                target,
                self._app,
                pool_size=self._pool_size,
                settings=settings or Settings.from_env(),
            )
            return Client(transport)
        raise ValueError(
            f"cannot tell how to reach {scheme or 'a target without a scheme'!r}: use "
            "postgresql:// (the database) or http(s):// (a Tether server's MCP endpoint)"
        )

    def __await__(self) -> Generator[Any, None, Client]:
        return self.open().__await__()

    async def __aenter__(self) -> Client:
        self._client = await self.open()
        return self._client

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


def connect(
    target: str | None = None,
    *,
    token: str | None = None,
    app: App | None = None,
    timeout: float = 30.0,
    pool_size: int = 10,
) -> Connecting:
    """Connect to Tether: `async with tether.client.connect(url) as client: …`, or
    `client = await tether.client.connect(url)` (then `await client.aclose()`).

    The URL's scheme picks the transport, and nothing else changes: the same code runs
    against the database or a server.

    Args:
        target: `postgresql://…` to use the database directly (a pool of the client's own,
            no worker: the servers' workers run what it starts), or `http(s)://host/mcp` for a
            running Tether server's MCP endpoint. None: TETHER_DATABASE_URL.
        token: (HTTP) the API token sent as a bearer token. A database URL carries its own
            credentials; a token with one is refused.
        app: (database) the App that defines the workflows you start; reading, answering,
            cancelling and watching runs work without it. Ignored over HTTP, where the server's
            App decides.
        timeout: (HTTP) seconds each request may take.
        pool_size: (database) connections in the client's pool.

    Returns:
        What opens the client: `await` it, or use it with `async with`.

    Raises:
        ValueError: (when awaited or entered) a target of another scheme, no target and no
            TETHER_DATABASE_URL, a token with a database URL, or a bad TETHER_* setting.
        TransportError: (when awaited or entered) the database cannot be reached.
    """
    return Connecting(target, token=token, app=app, timeout=timeout, pool_size=pool_size)
