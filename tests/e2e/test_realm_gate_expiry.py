"""What an agent meets after a gate's time is up, over real HTTP (Realm's rules for an expiry an
earlier call carried out): a late answer that names another choice, a gate that
only reports its expiry, and a run an `abort` expiry ended. Tether's worker carries the expiry
out at the deadline, so every late answer here meets an expiry already carried out."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_answer_tool import Client
from tests.e2e.test_realm_tools import run_state_until, tool
from tests.mcp_client import McpClient
from tether.runtime.registry import App

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

PROTOCOL = """
id: shipment
name: Shipment
version: 1
steps:
  pack:
    description: Pack the parcel
    execution: agent
    trust: human_confirmed
    gate:
      choices: [send, keep]
      timeout_seconds: 1
{expiry}
  label:
    description: Print the label
    execution: agent
    depends_on: [pack]
  check:
    description: Only sent parcels go on
    execution: guard
    depends_on: [label]
    abort_unless: ["pack.choice == 'send'"]
"""

EXPIRIES = {
    "settle": "      on_expiry: settle_default\n      default_choice: keep",
    "abort": "      on_expiry: abort",
    "report": "",
}


def build_app(expiry: str) -> App:
    app = App("realm-gate-expiry")
    app.protocol(PROTOCOL.format(expiry=EXPIRIES[expiry]))
    return app


async def _opened(c: McpClient) -> dict[str, Any]:
    run = (await tool(c, "start_run", {"workflow_id": "shipment"}))["run_id"]
    out = await tool(c, "execute_step", {"run_id": run, "command": "pack", "params": {}})
    assert out["status"] == "confirm_required", out
    return out


async def test_another_choice_after_a_default_was_settled_says_it_was_not_recorded(
    mcp_server: ServeFn, client: Client
) -> None:
    """Realm's table: settle_default carried out by an earlier call — the refusal carries
    `answer_recorded: false`, the run's phase, and the choice the expiry recorded."""
    async with mcp_server(build_app("settle")) as url:
        c = client(url)
        opened = await _opened(c)
        run, gate_id = opened["run_id"], opened["gate"]["gate_id"]
        await run_state_until(c, run, lambda s: s["run_phase"] == "running")
        late = await tool(
            c, "submit_human_response", {"run_id": run, "gate_id": gate_id, "choice": "send"}
        )
        assert (late["status"], late["error_code"], late["agent_action"]) == (
            "error",
            "STATE_BLOCKED",
            "report_to_user",
        )
        assert (late["answer_recorded"], late["run_phase"]) == (False, "running")
        assert late["error_details"] == {"winning_choice": "keep", "resolved_by": "timeout"}
        assert "guards" not in late
        again = await tool(
            c, "submit_human_response", {"run_id": run, "gate_id": gate_id, "choice": "keep"}
        )
        assert (again["status"], again["answer_recorded"], again["run_phase"]) == (
            "ok",
            False,
            "running",
        )


async def test_a_gate_without_on_expiry_shows_its_expiry_and_reports_it_once_passed(
    mcp_server: ServeFn, client: Client
) -> None:
    """Realm: `expires_at` is the open time plus timeout_seconds with or without on_expiry;
    past it, a gate with none is a `finding_only` health finding (in our words) and still
    takes its answer."""
    async with mcp_server(build_app("report")) as url:
        c = client(url)
        opened = await _opened(c)
        run, gate = opened["run_id"], opened["gate"]
        assert "expires_at" in gate
        state = await tool(c, "get_run_state", {"run_id": run})
        assert state["pending_gate"]["expires_at"] == gate["expires_at"]
        found = await run_state_until(c, run, lambda s: "run_health" in s)
        (finding,) = found["run_health"]
        assert (finding["kind"], finding["step"]) == ("gate_expired_awaiting_drive", "pack")
        assert finding["reason"] == (
            "the gate's time is up; it declares no on_expiry, so it still waits for an answer"
        )
        assert finding["evidence"]["disposition"] == "finding_only"
        assert finding["evidence"]["expires_at"] == gate["expires_at"]
        assert finding["evidence"]["gate_id"] == gate["gate_id"]
        answered = await tool(
            c,
            "submit_human_response",
            {"run_id": run, "gate_id": gate["gate_id"], "choice": "send"},
        )
        assert (answered["status"], answered["run_phase"]) == ("ok", "running")
        assert "answer_recorded" not in answered


async def test_a_run_an_abort_expiry_ended_names_the_gate_step_and_what_it_skipped(
    mcp_server: ServeFn, client: Client
) -> None:
    """Realm's abort expiry: the gate's step is skipped (`gate_expired`), so are the steps
    that could only follow it, and the seal names the step; an answer then is refused as on
    any ended run, without `answer_recorded`."""
    async with mcp_server(build_app("abort")) as url:
        c = client(url)
        opened = await _opened(c)
        run, gate_id = opened["run_id"], opened["gate"]["gate_id"]
        state = await run_state_until(c, run, lambda s: s["terminal_state"])
        assert (state["run_phase"], state["sealed_by_arm"], state["sealed_by_step"]) == (
            "aborted",
            "gate_expiry_abort",
            "pack",
        )
        assert state["completed_steps"] == []
        assert state["terminal_reason"] == (
            "Gate 'pack' expired and the run aborted per the workflow's declared on_expiry."
        )
        assert state["skipped_steps"] == ["pack", "label", "check"]
        assert state["skip_details"]["pack"] == {"kind": "gate_expired"}
        assert state["skip_details"]["label"]["kind"] == "trigger_rule"
        late = await tool(
            c, "submit_human_response", {"run_id": run, "gate_id": gate_id, "choice": "send"}
        )
        assert (late["error_code"], "answer_recorded" in late) == ("STATE_RUN_TERMINAL", False)
