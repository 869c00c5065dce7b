"""`tether runs resume RUN --from STEP`, the way back into a failed protocol run that the
protocol's replies name: a new run keeps the answers recorded before STEP and goes on from STEP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.apps import realm_resume
from tests.e2e.conftest import ServeFn
from tests.e2e.test_answer_tool import Client
from tests.e2e.test_realm_tools import run_state_until, tool
from tests.test_cli import as_json, tether

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

APP = "tests/apps/realm_resume.py:app"
HANDLERS = "tests/apps/realm_resume.py:handlers_only"


def _ready(state: dict[str, Any]) -> bool:
    """An agent step is ready, or the run has ended."""
    return bool(state["next_actions"] or state["terminal_state"])


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
        assert failed["error_code"] == "ENGINE_HANDLER_FAILED"  # Realm: a handler raised
        assert failed["stopped_step"] == "pay"  # the answer was recorded; pay stopped the call
        assert failed["errors"] == ["Handler 'pay' raised: the bank is closed"]
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
        old = await tool(c, "get_run_state", {"run_id": run})  # the run asked about …
        assert (old["run_id"], old["run_phase"]) == (run, "failed")
        assert old["successor"] == {"run_id": resumed["id"], "relation": "resumed"}  # … and on
        assert "resumable" not in old  # it went on: not offered again
        assert old["context_hint"] == (
            f"Run '{run}' is failed. It went on as run '{resumed['id']}' (resumed); read that "
            "run for where the work stands."
        )
        state = await run_state_until(c, resumed["id"], _ready)
        assert (state["run_id"], state["resume_of"]) == (resumed["id"], run)
        assert state["completed_steps"] == ["assess", "pay"], str(state)  # the answer was kept
        assert state["next_actions"][0]["instruction"]["params"]["command"] == "confirm"
        assert realm_resume.PAID == [7]


async def test_the_printed_way_back_works_when_protocols_come_from_a_directory(
    mcp_server: ServeFn, client: Client, db_url: str, tmp_path: Path
) -> None:
    """`tether runs` loads the protocol directory as `tether serve` does (--protocols, or
    TETHER_PROTOCOLS), so the command a failed run's reply prints finds its workflow."""
    (tmp_path / "payout.yaml").write_text(realm_resume.PROTOCOL, encoding="utf-8")
    app = realm_resume.handlers_only
    app.load_protocols(tmp_path)
    realm_resume.FAILING[0] = True
    async with mcp_server(app) as url:
        c = client(url)
        run = (await tool(c, "start_run", {"workflow_id": "payout_resume"}))["run_id"]
        answer = {"run_id": run, "command": "assess", "params": {"amount": 9}}
        failed = await tool(c, "execute_step", answer)
        assert failed["context_hint"].endswith(f"tether runs resume {run} --from pay"), failed

        realm_resume.FAILING[0] = False
        by_flag = tether(
            db_url, "runs", "--app", HANDLERS, "--protocols", str(tmp_path), "--json",
            "resume", run, "--from", "pay",
        )  # fmt: skip
        went_on = as_json(by_flag)["id"]
        assert went_on != run
        state = await run_state_until(c, went_on, _ready)
        assert state["completed_steps"] == ["assess", "pay"], str(state)

        # The same command reads TETHER_PROTOCOLS when no flag is given.
        second = (await tool(c, "start_run", {"workflow_id": "payout_resume"}))["run_id"]
        realm_resume.FAILING[0] = True
        answer = {"run_id": second, "command": "assess", "params": {"amount": 4}}
        assert (await tool(c, "execute_step", answer))["run_phase"] == "failed"
        realm_resume.FAILING[0] = False
        by_env = tether(
            db_url, "runs", "--app", HANDLERS, "--json", "resume", second, "--from", "pay",
            env={"TETHER_PROTOCOLS": str(tmp_path)},
        )  # fmt: skip
        assert as_json(by_env)["id"] != second
