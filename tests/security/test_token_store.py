"""The token store, the audit trail and the limits over real HTTP on loopback and a real
PostgreSQL: tokens created by the CLI work at once on every server sharing the
database, `list` shows their last use and never their secret, a revoked token is refused on
the very next request on another server (NOTIFY), an expired one too; every action leaves an
audit row (ok, refused, error) and a tasks/get poll none; a caller over its rate gets 429 with
Retry-After; a caller over its open-stream cap gets 429."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from starlette.applications import Starlette

from tests.e2e.conftest import on_loopback, server_settings
from tests.mcp_client import McpClient, meta
from tether.app import create_app
from tether.cli import access
from tether.cli.parser import build_parser
from tether.examples import app as examples
from tether.jsonrpc import codes
from tether.principal import Principal
from tether.runtime import tokens
from tether.runtime.service import database
from tether.runtime.tokens import TokenStore
from tether.security import new_token
from tether.security.tokens import hash_token
from tether.settings import Settings

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

START = {"name": "start_long_job", "arguments": {"body": {"steps": 1, "pause_seconds": 0}}}
SLOW = {"name": "start_long_job", "arguments": {"body": {"steps": 2, "pause_seconds": 600}}}


@contextlib.asynccontextmanager
async def server(db_url: str, **settings: Any) -> AsyncIterator[tuple[McpClient, Starlette]]:
    """Tether for the examples app on loopback; yields a client and the app (its state holds
    the token store and the audit writer)."""
    conf = server_settings(db_url, **settings)
    web = create_app(examples, conf, db_url)
    async with on_loopback(web, conf.mcp_path) as url:
        client = McpClient(url)
        try:
            yield client, web
        finally:
            await client.aclose()


async def cli(db_url: str, *argv: str) -> tuple[int, str]:
    """`tether tokens …|audit …` through the handlers (in a thread: they run their own loop)."""
    args = build_parser().parse_args(argv)
    out = io.StringIO()
    code = await asyncio.to_thread(access.run, args, Settings(database_url=db_url), out)
    return code, out.getvalue()


async def reloaded_until(web: Starlette, done: Callable[[TokenStore[Principal]], bool]) -> None:
    """Wait (bounded) until the server's token cache satisfies `done` — it reloads on NOTIFY."""
    store: TokenStore[Principal] = web.state.tokens
    async with asyncio.timeout(5):
        while not done(store):
            await store.wait_generation(store.generation + 1)


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def test_token_lifecycle_across_two_servers(db_url: str) -> None:
    """create → the token works on both servers (and anonymous callers are now refused) →
    `list` shows its last use and never the secret or its hash → revoke → the other server
    refuses it on the very next request, 401 with a Bearer challenge."""
    async with server(db_url) as (a, web_a), server(db_url) as (b, web_b):
        assert (await a.request("tools/list")).status_code == 200  # no token yet: dev mode
        code, out = await cli(db_url, "tokens", "create", "--role", "operator", "--name", "bot")
        assert code == 0
        secret = out.split("shown once): ")[1].split()[0]
        digest = hash_token(secret)
        for web in (web_a, web_b):
            await reloaded_until(web, lambda s: digest in s)
        anonymous = await a.request("tools/list")
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        assert (await a.request("tools/call", START, headers=bearer(secret))).status_code == 200
        assert (await b.request("tools/list", headers=bearer(secret))).status_code == 200

        await web_a.state.tokens.flush()  # what shutdown does; normally once a minute
        code, listing = await cli(db_url, "tokens", "list", "--json")
        assert code == 0 and secret not in listing and digest not in listing
        (row,) = orjson.loads(listing)
        assert (row["name"], row["role"], row["tenant"]) == ("bot", "operator", None)
        assert row["last_used_at"] is not None and row["revoked_at"] is None

        assert (await cli(db_url, "tokens", "revoke", "bot"))[0] == 0
        await reloaded_until(web_b, lambda s: digest not in s)
        refused = await b.request("tools/list", headers=bearer(secret))
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.json()["error"]["code"] == codes.UNAUTHENTICATED
        # Revoking the last token does not reopen the server.
        assert (await b.request("tools/list")).status_code == 401
        assert (await cli(db_url, "tokens", "revoke", "bot"))[0] == 1  # no live token left
        code, listing = await cli(db_url, "tokens", "list", "--all", "--json")
        assert [r["revoked_at"] is not None for r in orjson.loads(listing)] == [True]


async def test_expired_token_is_refused_and_static_tokens_still_work(db_url: str) -> None:
    """An expired database token → 401; TETHER_API_TOKENS entries work beside the store."""
    expired, live = "tt_expired-secret", "tt_live-secret"
    static, static_entry = new_token("env", "reader")
    async with database(db_url) as db:
        past = datetime.now(UTC) - timedelta(minutes=1)
        for name, secret, when in (("old", expired, past), ("new", live, None)):
            await tokens.create(
                db,
                name=name,
                role="reader",
                tenant=None,
                digest=hash_token(secret),
                expires_at=when,
            )
    async with server(db_url, api_tokens=static_entry) as (c, _):
        assert (await c.request("tools/list", headers=bearer(expired))).status_code == 401
        assert (await c.request("tools/list", headers=bearer(live))).status_code == 200
        assert (await c.request("tools/list", headers=bearer(static))).status_code == 200


async def test_every_action_leaves_an_audit_row_and_polls_do_not(db_url: str) -> None:
    """One row per tool call, tasks/update and tasks/cancel — ok, refused (by role) and error
    (with its code) alike — with principal, tool, execution id and remote address; tasks/get
    polls leave none. Rows are written in the background within a second (the test waits for
    the writer, not for shutdown); `tether audit` filters by principal and run."""
    reader, reader_entry = new_token("ann", "reader")
    operator, operator_entry = new_token("bob", "operator")
    async with server(db_url, api_tokens=f"{reader_entry},{operator_entry}") as (c, web):
        created = await c.result("tools/call", SLOW, headers=bearer(operator))
        task_id = created["taskId"]
        for _ in range(3):
            assert (
                await c.request("tasks/get", {"taskId": task_id}, headers=bearer(operator))
            ).status_code == 200
        refused = await c.request("tools/call", START, headers=bearer(reader))
        assert refused.status_code == 403
        unknown = await c.request("tasks/cancel", {"taskId": "nope"}, headers=bearer(operator))
        assert "error" in unknown.json()
        assert (
            await c.request("tasks/cancel", {"taskId": task_id}, headers=bearer(operator))
        ).status_code == 200
        async with asyncio.timeout(5):
            await web.state.auditor.wait_written(4)
    code, out = await cli(db_url, "audit", "--json")
    assert code == 0
    rows = [
        (
            r["principal"],
            r["surface"],
            r["method"],
            r["tool"],
            r["execution_id"],
            r["outcome"],
            r["error_code"],
        )
        for r in reversed(orjson.loads(out))
    ]
    assert rows == [
        ("bob", "mcp", "tools/call", "start_long_job", task_id, "ok", None),
        ("ann", "mcp", "tools/call", "start_long_job", None, "refused", codes.UNAUTHORIZED),
        ("bob", "mcp", "tasks/cancel", None, "nope", "error", unknown.json()["error"]["code"]),
        ("bob", "mcp", "tasks/cancel", None, task_id, "ok", None),
    ]
    assert all(r["remote"] == "127.0.0.1" for r in orjson.loads(out))
    code, out = await cli(db_url, "audit", "--json", "--principal", "ann", "--since", "1h")
    assert [r["outcome"] for r in orjson.loads(out)] == ["refused"]
    code, out = await cli(db_url, "audit", "--json", "--run", task_id)
    assert [r["method"] for r in orjson.loads(out)] == ["tasks/cancel", "tools/call"]
    code, text = await cli(db_url, "audit", "--principal", "ann")
    assert code == 0 and "refused" in text and "start_long_job" in text


async def test_token_changes_are_audited_and_bad_cli_input_changes_nothing(db_url: str) -> None:
    """`tokens create` and `revoke` leave cli rows (a refused duplicate too); a bad --expires
    or name is exit 2 with no token and no row."""
    assert (await cli(db_url, "tokens", "create", "--role", "admin", "--name", "x"))[0] == 0
    assert (await cli(db_url, "tokens", "create", "--role", "admin", "--name", "x"))[0] == 1
    assert (await cli(db_url, "tokens", "revoke", "x"))[0] == 0
    for bad in (["--expires", "soon"], ["--expires", "2001-01-01"], ["--name", "a b"]):
        assert (await cli(db_url, "tokens", "create", "--role", "admin", *bad))[0] == 2, bad
    code, out = await cli(db_url, "audit", "--json")
    rows = [(r["surface"], r["method"], r["outcome"]) for r in reversed(orjson.loads(out))]
    assert rows == [
        ("cli", "tokens/create", "ok"),
        ("cli", "tokens/create", "refused"),
        ("cli", "tokens/revoke", "ok"),
    ]
    assert all(r["principal"].startswith("cli:") for r in orjson.loads(out))
    code, listing = await cli(db_url, "tokens", "list", "--all", "--json")
    assert code == 0 and len(orjson.loads(listing)) == 1


async def test_a_caller_over_its_rate_gets_429_with_retry_after(db_url: str) -> None:
    """Token bucket per token: two requests pass, the third is 429 with `Retry-After` and a
    JSON-RPC RateLimited error; another token's bucket is its own."""
    ann, ann_entry = new_token("ann", "reader")
    cy, cy_entry = new_token("cy", "reader")
    async with server(db_url, api_tokens=f"{ann_entry},{cy_entry}", rate_limit="1/m burst 2") as (
        c,
        _,
    ):
        for _ in range(2):
            assert (await c.request("tools/list", headers=bearer(ann))).status_code == 200
        limited = await c.request("tools/list", headers=bearer(ann))
        assert limited.status_code == 429
        assert int(limited.headers["retry-after"]) >= 1
        assert limited.json()["error"]["code"] == codes.RATE_LIMITED
        assert (await c.request("tools/list", headers=bearer(cy))).status_code == 200


async def test_open_streams_per_token_are_capped(db_url: str) -> None:
    """With TETHER_MAX_STREAMS_PER_TOKEN=1, a second watch stream while one is open is 429
    (RateLimited); once the first stream closes, the slot is free again."""
    op, op_entry = new_token("op", "operator")
    async with server(db_url, api_tokens=op_entry, max_streams_per_token=1) as (c, _):
        task_id = (await c.result("tools/call", SLOW, headers=bearer(op)))["taskId"]
        watch = {
            "name": "long_job_watch",
            "arguments": {"handle": task_id},
            "_meta": meta(progressToken="w"),
        }
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": watch})
        headers = {**c.headers("tools/call", watch), **bearer(op)}

        async with c.http.stream("POST", c.url, content=body, headers=headers) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            async with asyncio.timeout(5):
                async for line in stream.aiter_lines():
                    if line.startswith("data:"):
                        break
            second = await c.http.post(c.url, content=body, headers=headers)
            assert second.status_code == 429
            assert second.json()["error"]["code"] == codes.RATE_LIMITED
        async with asyncio.timeout(5):
            while True:  # the server notices the closed stream and gives the slot back
                async with c.http.stream("POST", c.url, content=body, headers=headers) as again:
                    if again.status_code == 200:
                        break
                await asyncio.sleep(0.05)
