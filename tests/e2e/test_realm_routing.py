"""Realm's order-and-routing example run by the interpreter: trigger rules (`one_failed`
after a failed payment), `when` (a skipped step), a guard, and a finalizer that runs once
after any ending (tests/specs/realm/examples/refund.yaml, handlers registered in Python)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_answer_tool import Client
from tests.e2e.test_realm_tools import tool
from tests.mcp_client import McpClient
from tether.runtime.registry import App

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

REFUND = Path(__file__).parents[1] / "specs" / "realm" / "examples" / "refund.yaml"


def build_app(fail_pay: bool, notes: list[str]) -> App:
    app = App("realm-routing")
    app.protocol(REFUND)

    @app.handler()
    def pay(inputs: dict[str, Any]) -> dict[str, Any]:
        if fail_pay:
            raise RuntimeError("card declined")
        return {"paid": inputs["steps"]["assess"]["amount"]}

    @app.handler()
    def note(inputs: dict[str, Any]) -> dict[str, Any]:
        notes.append("note")
        return {"noted": True}

    return app


async def _state(c: McpClient, run: str) -> dict[str, Any]:
    for _ in range(200):
        state = await tool(c, "get_run_state", {"run_id": run, "include_steps": True})
        if state["terminal_state"]:
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(state)


@pytest.mark.parametrize(
    ("fail_pay", "risk", "phase", "done", "noted"),
    [  # noted: open_ticket or send_receipt when it runs, and close_books (always) once
        (True, "low", "completed", ["assess", "only_low_risk", "open_ticket"], 2),
        (False, "low", "completed", ["assess", "only_low_risk", "pay", "send_receipt"], 2),
        (False, "high", "aborted", ["assess"], 1),
    ],
)
async def test_refund_routes_by_outcome_and_finalizes_once(
    mcp_server: ServeFn,
    client: Client,
    fail_pay: bool,
    risk: str,
    phase: str,
    done: list[str],
    noted: int,
) -> None:
    notes: list[str] = []
    async with mcp_server(build_app(fail_pay, notes)) as url:
        c = client(url)
        run = (await tool(c, "start_run", {"workflow_id": "refund"}))["run_id"]
        answer = {"risk": risk, "amount": 20}
        out = await tool(c, "execute_step", {"run_id": run, "command": "assess", "params": answer})
        assert out["status"] == "ok", out
        state = await _state(c, run)
        assert state["run_phase"] == phase
        assert state["completed_steps"] == done  # flag_large: when false (20 <= 50), skipped
        assert state["failed_steps"] == (["pay"] if fail_pay else [])
        assert len(notes) == noted
        assert set(state["steps"]) == {*done, *state["failed_steps"]}  # include_steps: what ran
        assert state["steps"]["assess"]["attempts"] == [
            {"attempt": 1, "status": "success", "cost_unrecorded": "not_driven_by_realm"}
        ]
        if fail_pay:
            assert [a["status"] for a in state["steps"]["pay"]["attempts"]] == ["error"]
        assert state["next_actions_status"] == "skipped_terminal"  # Realm's run state
        assert (state["workflow_id"], state["params"], state["in_progress_steps"]) == (
            "refund", {}, [],
        )  # fmt: skip
        if phase == "aborted":
            assert (state["sealed_by_arm"], state["sealed_by_step"]) == (
                "guard_abort",
                "only_low_risk",
            )
            assert "terminal_reason" not in state
            assert state["abort_context"] == {  # Realm's run state
                "step_id": "only_low_risk",
                "conditions": [
                    {"condition": "assess.risk == 'low'", "resolved_value": "high", "passed": False}
                ],
                "abort_message": "High-risk refunds are not automated.",
            }
        else:
            assert "flag_large" in state["skipped_steps"]  # when: false (20 <= 50)
            assert "abort_context" not in state
            assert state["skip_details"]["flag_large"] == {
                "kind": "when_false",
                "expression": "assess.amount > 50",
                "leaves": [
                    {
                        "leaf": "assess.amount > 50",
                        "lhs_present": True,
                        "resolved_value": 20,
                        "passed": False,
                    }
                ],
            }
            assert (state["sealed_by_arm"], state["terminal_reason"]) == (
                "complete", "Workflow completed.",
            )  # fmt: skip
        assert "run_health" not in state and "step_claims" not in state  # the run has ended


async def test_an_abandoned_run_runs_no_finalizer(mcp_server: ServeFn, client: Client) -> None:
    notes: list[str] = []
    async with mcp_server(build_app(False, notes)) as url:
        c = client(url)
        run = (await tool(c, "start_run", {"workflow_id": "refund"}))["run_id"]
        gone = await tool(c, "abandon_run", {"run_id": run})
        assert gone["run_phase"] == "abandoned"
        state = await _state(c, run)
        assert state["completed_steps"] == []
        assert state["sealed_by_arm"] == "abandon_requested"
        await asyncio.sleep(0.3)  # a finalizer, were one to run, would have run by now
        assert notes == []


async def test_a_finalizer_without_its_handler_is_left_cleanup_pending(
    mcp_server: ServeFn, client: Client
) -> None:
    """A finalizer whose handler this server lacks is not a failure: Realm leaves it
    `cleanup_pending` (get_run_state `cleanup_pending{steps, command}`)."""
    app = App("realm-routing-pending")
    app.protocol(REFUND)  # close_books' handler `note` is not registered
    async with mcp_server(app) as url:
        c = client(url)
        run = (await tool(c, "start_run", {"workflow_id": "refund"}))["run_id"]
        answer = {"risk": "high", "amount": 20}  # the guard aborts; close_books (always) is owed
        await tool(c, "execute_step", {"run_id": run, "command": "assess", "params": answer})
        state = await _state(c, run)
        assert state["run_phase"] == "aborted"
        assert state["cleanup_pending"] == {
            "steps": ["close_books"],
            "command": f"tether runs resume {run} --from close_books",
        }
        assert state["failed_steps"] == []
