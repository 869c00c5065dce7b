"""The database transport: what only it does (starts need the App; repeats of an answer are
reported as duplicates; TETHER_ENCRYPTION_KEYS opens sealed payloads as on the servers), and
how it fails. Our choice (docs/client.md)."""

from __future__ import annotations

import pytest

from tests.apps.client import app
from tests.e2e.conftest import serve
from tether.client import TransportError, WorkflowNotFound, connect
from tether.runtime.payloads import new_key

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

WAIT_S = 15.0


async def test_without_the_app_a_client_steers_runs_but_cannot_start_them(db_url: str) -> None:
    """Reading, answering and watching need no App; a start says to pass one."""
    async with serve(app, db_url) as url:
        async with connect(url) as over_http:
            run = await over_http.start("review", {"title": "A"})
        async with connect(db_url) as client:
            with pytest.raises(WorkflowNotFound, match="app=app"):
                await client.start("review", {"title": "B"})
            mine = client.get_handle(run.id)
            assert (await mine.wait(timeout=WAIT_S)).needs_input
            await mine.answer("publish", {"decision": "approve", "ticket": "T"})
            assert (await mine.result(timeout=WAIT_S))["decision"] == "approved"


async def test_a_workflow_not_served_over_mcp_starts_over_the_database(db_url: str) -> None:
    """The database transport starts any workflow of the App, MCP or not."""
    async with serve(app, db_url), connect(db_url, app=app) as client:
        run = await client.start("internal", {})
        assert await run.result(timeout=WAIT_S) == "done"


async def test_a_repeated_answer_is_reported_as_a_duplicate(db_url: str) -> None:
    """The same answer again changes nothing and says so (over HTTP the wait is simply no
    longer open)."""
    async with serve(app, db_url), connect(db_url, app=app) as client:
        run = await client.start("review", {"title": "D"})
        await run.wait(timeout=WAIT_S)
        answer = {"decision": "approve", "ticket": "T"}
        first = await run.answer("publish", answer)
        again = await run.answer("publish", answer)
        assert (first.duplicate, again.duplicate) == (False, True)
        assert again.key == first.key


async def test_sealed_outputs_read_with_the_servers_keys(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With TETHER_ENCRYPTION_KEYS set as on the server, the output reads as it was written;
    without, the stored envelope is all there is to read."""
    keys = f"k1:{new_key()}"
    async with serve(app, db_url, encryption_keys=keys), connect(db_url, app=app) as client:
        run = await client.start("echo", {"text": "secret"})
        await run.wait(timeout=WAIT_S)
    async with connect(db_url) as client:
        sealed = await client.get_handle(run.id).status()
    assert isinstance(sealed.output, dict) and set(sealed.output) == {"$enc", "kid", "n", "c"}
    monkeypatch.setenv("TETHER_ENCRYPTION_KEYS", keys)
    async with connect(db_url) as client:
        assert await client.get_handle(run.id).result(timeout=WAIT_S) == "secret"


async def test_a_database_that_cannot_be_reached_is_a_transport_error() -> None:
    """Nothing listens on the port: connecting is a TransportError."""
    with pytest.raises(TransportError):
        await connect("postgresql://tether@127.0.0.1:9/nothing")
