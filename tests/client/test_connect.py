"""`connect` picks the transport from the URL's scheme and refuses what fits neither; each
argument belongs to its transport. Our choice (docs/client.md)."""

from __future__ import annotations

import secrets

import pytest

from tether.client import connect


@pytest.mark.parametrize(
    "target", ["ftp://host/x", "127.0.0.1:8000/mcp", "mysql://db/x", "localhost/tether"]
)
async def test_a_target_of_another_scheme_is_refused(target: str) -> None:
    """Only postgresql:// (or postgres://) and http(s):// say how to reach Tether."""
    with pytest.raises(ValueError, match="postgresql://"):
        await connect(target)


async def test_a_token_with_a_database_url_is_refused() -> None:
    """A database URL carries its own credentials: a token there is a mistake, said before
    anything connects."""
    with pytest.raises(ValueError, match="token"):
        await connect("postgresql://db.invalid/tether", token=secrets.token_urlsafe())


async def test_no_target_and_no_database_url_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a target the client needs TETHER_DATABASE_URL."""
    for name in ("DATABASE_URL", "LISTEN_DATABASE_URL", "DATABASE_POOLER"):  # a pooler's too
        monkeypatch.delenv(f"TETHER_{name}", raising=False)
    with pytest.raises(ValueError, match="TETHER_DATABASE_URL"):
        await connect()


async def test_an_http_url_connects_without_a_round_trip_and_closes() -> None:
    """http(s):// makes an HTTP client at once (nothing is sent until a call), awaitable or
    as a context manager; a handle is made from a stored id without any I/O."""
    client = await connect("https://tether.invalid/mcp", token=secrets.token_urlsafe())
    assert client.transport == "http"
    handle = client.get_handle("ex_1")
    assert handle.id == "ex_1" and "ex_1" in repr(handle)
    with pytest.raises(ValueError):
        client.get_handle("")
    await client.aclose()
    async with connect("http://tether.invalid/mcp") as other:
        assert other.transport == "http"


async def test_wait_refuses_an_unknown_stop() -> None:
    """`until` is "settled" or "ended"."""
    async with connect("http://tether.invalid/mcp") as client:
        with pytest.raises(ValueError, match="until"):
            await client.get_handle("ex_1").wait(until="never")  # type: ignore[arg-type]
