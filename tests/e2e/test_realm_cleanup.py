"""A cleanup step (finalizer) whose handler the server lacks is left pending, and every reply
on the ended run closes with the protocol's fixed sentence about it, which names the command to
run it later, in a server that has the handler: `tether runs resume RUN --from STEP`, which keeps
every other recorded call."""

from __future__ import annotations

import pytest

from tests.apps import realm_cleanup
from tests.e2e.conftest import ServeFn
from tests.e2e.test_answer_tool import Client
from tests.e2e.test_realm_tools import run_state_until, tool
from tests.test_cli import as_json, tether

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

APP = "tests/apps/realm_cleanup.py:app"


async def test_a_cleanup_step_left_pending_is_named_with_the_command_that_runs_it(
    mcp_server: ServeFn, client: Client, db_url: str
) -> None:
    async with mcp_server(realm_cleanup.app) as url:
        c = client(url)
        run = (await tool(c, "start_run", {"workflow_id": "cleanup_owed"}))["run_id"]
        answer = {"run_id": run, "command": "draft", "params": {"text": "v1"}}
        done = await tool(c, "execute_step", answer)
        command = f"tether runs resume {run} --from tidy"
        sentence = (
            f"Cleanup step left pending: 'tidy' — '{command}' runs it with code that has its "
            "handler."
        )
        assert (done["status"], done["run_phase"]) == ("ok", "completed"), done
        assert done["context_hint"] == f"Run completed. {sentence}"
        again = await tool(c, "advance_run", {"run_id": run})
        assert again["context_hint"] == (
            f"Run '{run}' is already terminal (completed); nothing ran. {sentence}"
        )
        repeat = await tool(c, "execute_step", answer)
        assert (repeat["status"], repeat["agent_action"]) == ("ok", "stop")
        assert repeat["context_hint"].endswith(f"no steps executed. {sentence}")
        gate = {"run_id": run, "gate_id": "g", "choice": "x"}
        late = await tool(c, "submit_human_response", gate)
        assert (late["command"], late["error_code"], late["agent_action"]) == (
            "submit_gate", "STATE_RUN_TERMINAL", "report_to_user",
        )  # fmt: skip
        terminal = f"Run '{run}' has ended (completed), so no gate of it can be answered now"
        # said once: "it completed; cleanup step left pending …"
        assert late["context_hint"] == f"{terminal}; it completed; c{sentence[1:]}"
        state = await run_state_until(c, run, lambda s: s["terminal_state"])
        assert state["cleanup_pending"] == {"steps": ["tidy"], "command": command}

        cli = ("runs", "--app", APP)
        refused = tether(db_url, *cli, "resume", run, "--from", "draft", check=False)
        assert refused.returncode == 1  # a completed run resumes only from a pending cleanup step
        realm_cleanup.provide_tidy()  # the server now has the handler
        resumed = as_json(
            tether(db_url, "runs", "--app", APP, "--json", "resume", run, "--from", "tidy")
        )
        old = await tool(c, "get_run_state", {"run_id": run})  # the run asked about, and on
        assert (old["run_id"], old["successor"]) == (
            run,
            {"run_id": resumed["id"], "relation": "resumed"},
        )
        assert "cleanup_pending" not in old  # the resumed run ran it
        state = await run_state_until(c, resumed["id"], lambda s: s["terminal_state"])
        assert state["run_id"] == resumed["id"] != run
        assert (state["run_phase"], state["completed_steps"]) == ("completed", ["draft"])
        assert "cleanup_pending" not in state
        assert realm_cleanup.TIDIED == ["v1"]  # the kept answer; only the cleanup step ran
