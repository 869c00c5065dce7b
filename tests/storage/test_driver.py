"""The storage seam (storage/driver.py): asyncpg's pool, its pooled connections, a plain
connection and our Listener provide every member of the Protocol the runtime names them by,
callable as the Protocol says. mypy checks the same statically; this catches a driver upgrade
whose stubs and code disagree. Our choice (the runtime names the driver by a Protocol, as
pgqueuer does with its Driver)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import asyncpg
import pytest

from tether.storage import pool as tpool
from tether.storage.driver import Acquire, Connection, Database, Notifications, Queryable
from tether.storage.notify import Listener

pytestmark = pytest.mark.postgres

_PROTOCOL_DUNDERS = {"__aenter__", "__aexit__", "__await__"}


def _members(protocol: type) -> dict[str, Any]:
    """The members a Protocol declares, its bases' included."""
    out: dict[str, Any] = {}
    for cls in reversed(protocol.__mro__):
        if cls is object or cls.__name__ in {"Protocol", "Generic"}:
            continue
        out.update(
            (name, value)
            for name, value in vars(cls).items()
            if not name.startswith("_") or name in _PROTOCOL_DUNDERS
        )
    return out


def _call_shape(fn: Any) -> tuple[list[object], dict[str, object]]:
    """Arguments exercising every parameter of a Protocol method's signature."""
    args: list[object] = []
    kwargs: dict[str, object] = {}
    for param in list(inspect.signature(fn).parameters.values())[1:]:  # skip self
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            args.append(param.name)
        elif param.kind is param.VAR_POSITIONAL:
            args += ["one", "two"]
        elif param.kind is param.KEYWORD_ONLY:
            kwargs[param.name] = param.default
    return args, kwargs


def _missing(protocol: type, impl: object) -> list[str]:
    """Members of `protocol` that `impl` lacks or cannot be called with as declared."""
    problems = []
    for name, declared in _members(protocol).items():
        if isinstance(declared, property):
            if not hasattr(impl, name):
                problems.append(name)
            continue
        found = getattr(impl, name, None)
        if not callable(found):
            problems.append(name)
            continue
        args, kwargs = _call_shape(declared)
        try:
            inspect.signature(found).bind(*args, **kwargs)
        except TypeError:
            problems.append(f"{name}{inspect.signature(found)}")
    return problems


async def test_asyncpg_and_the_listener_provide_the_protocols(
    db: asyncpg.Pool, db_url: str
) -> None:
    """Each concrete piece the runtime receives fits the Protocol it is received as."""
    assert _missing(Database, db) == []
    acquiring = db.acquire()
    assert _missing(Acquire, acquiring) == []
    async with acquiring as pooled:
        assert _missing(Connection, pooled) == []
    plain = await tpool.connect(db_url)
    try:
        assert _missing(Connection, plain) == []
        assert _missing(Queryable, plain) == []
    finally:
        await plain.close()
    listener = Listener(db_url)
    assert _missing(Notifications, listener) == []
    assert isinstance(listener.ready, asyncio.Event)


async def test_the_check_sees_a_missing_member(db_url: str) -> None:
    """A connection is not a pool: the check names what it lacks."""
    plain = await tpool.connect(db_url)
    try:
        assert sorted(_missing(Database, plain)) == ["acquire", "get_max_size", "release"]
    finally:
        await plain.close()
