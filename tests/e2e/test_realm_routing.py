"""Order and routing run by the interpreter: trigger rules (`one_failed` after a failed
upload), `when` (a skipped step), a guard, and a finalizer that runs once after any ending
(tests/specs/realm/workflows/trigger-rules.yaml, handlers registered in Python)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_answer_tool import Client
from tests.e2e.test_realm_tools import run_state_until, tool
from tether.runtime.registry import App

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

RELEASE = Path(__file__).parents[1] / "specs" / "realm" / "workflows" / "trigger-rules.yaml"


def build_app(fail_upload: bool, notes: list[str]) -> App:
    app = App("realm-routing")
    app.protocol(RELEASE)

    @app.handler()
    def upload(inputs: dict[str, Any]) -> dict[str, Any]:
        if fail_upload:
            raise RuntimeError("bucket refused the write")
        return {"uploaded": inputs["steps"]["review"]["rows"]}

    @app.handler()
    def log(inputs: dict[str, Any]) -> dict[str, Any]:
        notes.append("log")
        return {"logged": True}

    return app


@pytest.mark.parametrize(
    ("fail_upload", "license", "phase", "done", "noted"),
    [  # noted: file_incident or announce when it runs, and unlock (always) once
        (True, "open", "completed", ["review", "open_only", "file_incident"], 2),
        (False, "open", "completed", ["review", "open_only", "upload", "announce"], 2),
        (False, "restricted", "aborted", ["review"], 1),
    ],
)
async def test_a_release_routes_by_outcome_and_finalizes_once(
    mcp_server: ServeFn,
    client: Client,
    fail_upload: bool,
    license: str,
    phase: str,
    done: list[str],
    noted: int,
) -> None:
    notes: list[str] = []
    async with mcp_server(build_app(fail_upload, notes)) as url:
        c = client(url)
        run = (await tool(c, "start_run", {"workflow_id": "trigger-rules"}))["run_id"]
        answer = {"license": license, "rows": 20}
        out = await tool(c, "execute_step", {"run_id": run, "command": "review", "params": answer})
        assert out["status"] == "ok", out
        state = await run_state_until(c, run, lambda s: s["terminal_state"], include_steps=True)
        assert state["run_phase"] == phase
        assert state["completed_steps"] == done  # mark_large: when false (20 <= 1000), skipped
        assert state["failed_steps"] == (["upload"] if fail_upload else [])
        assert len(notes) == noted
        assert set(state["steps"]) == {*done, *state["failed_steps"]}  # include_steps: what ran
        assert state["steps"]["review"]["attempts"] == [
            {"attempt": 1, "status": "success", "cost_unrecorded": "not_driven_by_realm"}
        ]
        if fail_upload:
            assert [a["status"] for a in state["steps"]["upload"]["attempts"]] == ["error"]
        assert state["next_actions_status"] == "skipped_terminal"  # Realm's run state
        assert (state["workflow_id"], state["params"], state["in_progress_steps"]) == (
            "trigger-rules", {}, [],
        )  # fmt: skip
        if phase == "aborted":
            assert (state["sealed_by_arm"], state["sealed_by_step"]) == (
                "guard_abort",
                "open_only",
            )
            assert "terminal_reason" not in state
            assert state["abort_context"] == {  # Realm's run state
                "step_id": "open_only",
                "conditions": [
                    {
                        "condition": "review.license == 'open'",
                        "resolved_value": "restricted",
                        "passed": False,
                    }
                ],
                "abort_message": "Restricted datasets are released by hand.",
            }
        else:
            assert "mark_large" in state["skipped_steps"]  # when: false (20 <= 1000)
            assert "abort_context" not in state
            assert state["skip_details"]["mark_large"] == {
                "kind": "when_false",
                "expression": "review.rows > 1000",
                "leaves": [
                    {
                        "leaf": "review.rows > 1000",
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
        run = (await tool(c, "start_run", {"workflow_id": "trigger-rules"}))["run_id"]
        gone = await tool(c, "abandon_run", {"run_id": run})
        assert gone["run_phase"] == "abandoned"
        state = await run_state_until(c, run, lambda s: s["terminal_state"], include_steps=True)
        assert state["completed_steps"] == []
        assert state["sealed_by_arm"] == "abandon_requested"
    assert notes == []  # the server has drained its workers: a finalizer would have run by now


async def test_a_finalizer_without_its_handler_is_left_cleanup_pending(
    mcp_server: ServeFn, client: Client
) -> None:
    """A finalizer whose handler this server lacks is not a failure: it is left
    `cleanup_pending` (get_run_state `cleanup_pending{steps, command}`)."""
    app = App("realm-routing-pending")
    app.protocol(RELEASE)  # unlock's handler `log` is not registered
    async with mcp_server(app) as url:
        c = client(url)
        run = (await tool(c, "start_run", {"workflow_id": "trigger-rules"}))["run_id"]
        answer = {"license": "restricted", "rows": 20}  # the guard aborts; unlock is owed
        await tool(c, "execute_step", {"run_id": run, "command": "review", "params": answer})
        state = await run_state_until(c, run, lambda s: s["terminal_state"], include_steps=True)
        assert state["run_phase"] == "aborted"
        assert state["cleanup_pending"] == {
            "steps": ["unlock"],
            "command": f"tether runs resume {run} --from unlock",
        }
        assert state["failed_steps"] == []
