"""The read gate over real HTTP: with encryption on, a run's output is decoded only for admin,
or a role the operator opted in (TETHER_DECRYPT_FOR); anyone else sees the stored envelope, on
tasks/get and the status tool."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from tests.e2e.conftest import ServeFn
from tests.mcp_client import McpClient
from tether.runtime.context import Context
from tether.runtime.exposure import Exposure
from tether.runtime.payloads import new_key
from tether.runtime.registry import App
from tether.security import new_token

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

KEYS = f"k1:{new_key()}"


class Ask(BaseModel):
    question: str


def oracle_app() -> App:
    app = App()

    @app.workflow(expose=Exposure(tool_set=True))
    async def oracle(ctx: Context, ask: Ask) -> dict[str, str]:
        return {"answer": f"42 (SECRET-OUTPUT for {ask.question})"}

    return app


def _is_envelope(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"$enc", "kid", "n", "c"}


async def _outputs(c: McpClient, auth: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Start one run as the operator; what each principal reads of its output."""
    start = {"name": "start_oracle", "arguments": {"body": {"question": "life"}}}
    created = (await c.request("tools/call", start, headers=auth["operator"])).json()["result"]
    task_id = created["taskId"]
    await c.wait_task(task_id, {"completed"}, headers=auth["admin"])
    seen: dict[str, Any] = {}
    for who in ("admin", "operator"):
        task = await c.result("tasks/get", {"taskId": task_id}, headers=auth[who])
        seen[f"task:{who}"] = task["result"]["structuredContent"]
    for who in ("admin", "operator", "reader"):
        status = {"name": "oracle_status", "arguments": {"handle": task_id}}
        result = (await c.request("tools/call", status, headers=auth[who])).json()["result"]
        seen[f"status:{who}"] = result["structuredContent"]["output"]
    return seen


@pytest.mark.parametrize("decrypt_for", ["", "operator"])
async def test_outputs_are_decoded_only_for_principals_the_gate_admits(
    mcp_server: ServeFn, client: Callable[[str], McpClient], decrypt_for: str
) -> None:
    """Admin reads the output decoded; operator and reader get the stored envelope, unless
    their role is in TETHER_DECRYPT_FOR."""
    tokens = {role: new_token(f"{role}-1", role) for role in ("admin", "operator", "reader")}
    entries = ",".join(entry for _, entry in tokens.values())
    auth = {role: {"Authorization": f"Bearer {token}"} for role, (token, _) in tokens.items()}
    settings = {"api_tokens": entries, "encryption_keys": KEYS, "decrypt_for": decrypt_for}
    async with mcp_server(oracle_app(), **settings) as url:
        seen = await _outputs(client(url), auth)
    plain = {"answer": "42 (SECRET-OUTPUT for life)"}
    admitted = {"admin"} | ({"operator"} if decrypt_for else set())
    for place, value in seen.items():
        who = place.split(":")[1]
        if who in admitted:
            assert value == plain, place
        else:
            assert _is_envelope(value) and value["kid"] == "k1", place
            assert "SECRET" not in str(value)
