"""Our harness against Tether in-process (httpx `ASGITransport`, the app's lifespan driven by
the test): the same verdicts as over a socket for the scenarios that need no slow fixture
(the whole run in-process passes too, but costs ~10 s more than the test budget allows)."""

from __future__ import annotations

import httpx
import pytest

from tether.app import create_app
from tether.conformance.client import Client
from tether.conformance.context import Options
from tether.conformance.runner import run
from tether.settings import Settings
from tether.testing import conformance

pytestmark = [pytest.mark.postgres, pytest.mark.conformance]

#: Scenarios whose fixtures answer at once (the others wait on one-second runs; the socket
#: test covers them).
FAST = ["envelope", "origin", "meta", "headers", "discover", "durability"]


async def test_the_fast_scenarios_pass_against_tether_in_process(db_url: str) -> None:
    """Against Tether in-process every check of these scenarios passes (--strict)."""
    settings = Settings.model_validate(
        {"database_url": db_url, "poll_s": 0.05, "poll_interval_ms": 100, "state_key": "k"}
    )
    web = create_app(conformance.app, settings, db_url)
    async with web.router.lifespan_context(web):
        transport = httpx.ASGITransport(app=web)
        client = Client(f"http://127.0.0.1{settings.mcp_path}", transport=transport)
        try:
            checks = await run(client, Options(strict=True, timeout=10), FAST)
        finally:
            await client.aclose()
    verdicts = {c.id: c.status for c in checks}
    assert {k: v for k, v in verdicts.items() if v != "pass"} == {
        "routing:unadvertised-capability": "skip"  # the fixture app advertises them all
    }
    assert len(verdicts) > 60
