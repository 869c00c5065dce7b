"""SIGKILL `tether serve` between an answer (execute_step, or submit_human_response at a
gate) and the auto chain it makes ready: after a restart on the same database the answer is
still recorded and the chain runs exactly once (no lost answer, no double step). Injected
fault, checked by hand: with the handler's write moved before the kill, the last assertion
fails (`7 pay` twice)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import free_port, wait_exit
from tests.e2e.test_realm_tools import run_state_until, tool
from tests.e2e.test_server_kill import SERVER_ENV, Servers, wait_ready
from tests.mcp_client import McpClient

pytestmark = [pytest.mark.postgres, pytest.mark.e2e, pytest.mark.slow]

APP = "tests/apps/killable_realm.py:app"


async def _answer(c: McpClient, workflow: str) -> tuple[str, str, dict[str, Any]]:
    """Start a run and give the answer whose chain the server dies in: (run, tool, args)."""
    run = (await tool(c, "start_run", {"workflow_id": workflow}))["run_id"]
    answer = {"run_id": run, "command": "assess", "params": {"amount": 7}}
    if workflow == "payout":
        return run, "execute_step", answer
    gate = (await tool(c, "execute_step", answer))["gate"]
    return (
        run,
        "submit_human_response",
        {"run_id": run, "gate_id": gate["gate_id"], "choice": "pay"},
    )


@pytest.mark.parametrize("workflow", ["payout", "payout_gate"])
async def test_answer_then_sigkill_then_restart_runs_the_chain_once(
    db_url: str, tmp_path: Path, workflow: str
) -> None:
    servers = Servers(db_url, tmp_path, APP)
    env = {**SERVER_ENV, "SIDE_EFFECT_DIR": str(tmp_path)}
    try:
        port = free_port()
        first = servers.spawn("server1", "serve", APP, "--port", str(port), KILL_IN_PAY="1", **env)
        c1 = McpClient(await wait_ready(servers, "server1", first, port), timeout=10)
        run, answering, answer = await _answer(c1, workflow)
        with pytest.raises(httpx.TransportError):  # the server dies inside the chain
            await tool(c1, answering, answer)
        await c1.aclose()
        assert await wait_exit(first, 10) == -signal.SIGKILL, servers.log("server1")
        assert (tmp_path / "killed").exists()
        assert not (tmp_path / "pay.log").exists()  # killed before the chain's side effect

        second = servers.spawn("server2", "serve", APP, "--port", str(port), **env)
        c2 = McpClient(await wait_ready(servers, "server2", second, port), timeout=10)
        try:
            state = await run_state_until(c2, run, lambda s: s["next_actions"])
            assert state["completed_steps"] == ["assess", "pay"]  # the answer was not lost
            (action,) = state["next_actions"]
            assert action["instruction"]["params"]["command"] == "confirm"
            again = await tool(c2, answering, answer)  # resent: not done twice
            # execute_step: blocked; the same choice again: ok, "already resolved", no action
            assert again["status"] == ("blocked" if answering == "execute_step" else "ok"), again
            assert "chained_auto_steps" not in again
            done = await tool(c2, "execute_step", {"run_id": run, "command": "confirm"})
            assert done["run_phase"] == "completed", done
        finally:
            await c2.aclose()
        assert (tmp_path / "pay.log").read_text() == "7 pay\n"  # the chain ran exactly once
    finally:
        servers.kill_all()
