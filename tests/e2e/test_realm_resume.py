"""`tether runs resume RUN --from STEP`, the way back into a failed protocol run that Realm's
replies name: a new run keeps the answers recorded before STEP and goes on from STEP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.apps import realm_resume
from tests.e2e.conftest import ServeFn
from tests.e2e.test_answer_tool import Client
from tests.e2e.test_realm_tools import tool
from tests.mcp_client import McpClient
from tests.test_cli import as_json, tether

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

APP = "tests/apps/realm_resume.py:app"


async def _ready(c: McpClient, run: str) -> dict[str, Any]:
    for _ in range(200):
        state = await tool(c, "get_run_state", {"run_id": run})
        if state["next_actions"] or state["terminal_state"]:
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(state)


async def test_a_failed_auto_step_is_resumed_from_the_step_the_reply_names(
    mcp_server: ServeFn, client: Client, db_url: str
) -> None:
    realm_resume.FAILING[0] = True
    async with mcp_server(realm_resume.app) as url:
        c = client(url)
        run = (await tool(c, "start_run", {"workflow_id": "payout_resume"}))["run_id"]
        answer = {"run_id": run, "command": "assess", "params": {"amount": 7}}
        failed = await tool(c, "execute_step", answer)
        assert failed["status"] == "error", failed
        assert (failed["run_phase"], failed["agent_action"]) == ("failed", "stop")
        assert failed["error_code"] == "ENGINE_HANDLER_FAILED"  # handlers.md: a raised error
        assert failed["stopped_step"] == "pay"  # the answer was recorded; pay stopped the call
        assert failed["errors"] == ["Handler 'pay' threw: the bank is closed"]
        command = f"tether runs resume {run} --from pay"
        assert failed["context_hint"].endswith(command), failed["context_hint"]
        ended = await tool(c, "get_run_state", {"run_id": run})
        assert ended["resumable"] == {"steps": ["pay"], "command": command}
        again = await tool(c, "advance_run", {"run_id": run})  # the same way back, nothing ran
        assert "nothing ran. To make the failed step runnable again" in again["context_hint"]
        assert again["context_hint"].endswith(command)
        assert "agent_action" not in again

        refused = tether(db_url, "runs", "--app", APP, "resume", run, "--from", "nope", check=False)
        assert refused.returncode == 1
        assert "no recorded call of step 'nope'" in refused.stderr

        realm_resume.FAILING[0] = False
        resumed = as_json(
            tether(db_url, "runs", "--app", APP, "--json", "resume", run, "--from", "pay")
        )
        assert resumed["id"] != run
        state = await _ready(c, run)  # the old id follows to the resumed run
        assert state["run_id"] == resumed["id"]
        assert state["completed_steps"] == ["assess", "pay"], str(state)  # the answer was kept
        assert state["next_actions"][0]["instruction"]["params"]["command"] == "confirm"
        assert realm_resume.PAID == [7]
