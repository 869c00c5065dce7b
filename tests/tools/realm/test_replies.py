"""Pure replies of the protocol tools on rows (execute_step's refusals once the run is read)."""

from __future__ import annotations

from pathlib import Path

from tests.factories import execution_row
from tether.runtime.errors import StepFailed
from tether.runtime.functions import FunctionNotRegistered
from tether.runtime.realm.plan import plan_from_text
from tether.tools.realm import replies

WORKFLOWS = Path(__file__).parents[2] / "specs" / "realm" / "workflows"
PLAN = plan_from_text((WORKFLOWS / "trigger-rules.yaml").read_text(encoding="utf-8"))


def test_a_run_whose_workflow_this_process_does_not_hold_is_unreadable() -> None:
    row = execution_row(workflow="made-0a1b")  # e.g. a created workflow, after a restart
    out = replies.not_callable(None, row, "review", None)
    assert out is not None
    wire = out.to_wire()
    assert (wire["error_code"], wire["agent_action"]) == ("STATE_WORKFLOW_UNREADABLE", "stop")


def test_a_step_the_workflow_lacks_and_a_nonce_on_an_auto_step() -> None:
    row = execution_row(workflow="trigger-rules")
    missing = replies.not_callable(PLAN, row, "nope", None)
    assert missing is not None and missing.to_wire()["error_code"] == "STEP_NOT_FOUND"
    nonce = replies.not_callable(PLAN, row, "upload", "w1")
    assert nonce is not None
    assert nonce.to_wire()["error_details"]["step_type"] == "auto"
    assert replies.not_callable(PLAN, row, "review", "w1") is None


def test_lag_names_a_duration_in_its_largest_units() -> None:
    """late.lag: seconds under a minute, never `0m`."""
    from tether.tools.realm.gate_expiry import lag

    assert [lag(ms) for ms in (-5, 12_093, 184_311, 7_500_000, 93_600_000)] == [
        "0s", "12s", "3m", "2h 5m", "1d 2h",
    ]  # fmt: skip


def test_a_step_failed_for_a_function_not_registered_is_engine_handler_not_registered() -> None:
    """Realm's code for a step whose handler the process lacks when it is called: the step
    failed with the registry's one error, FunctionNotRegistered."""
    missing = FunctionNotRegistered("upload", ["notify"])
    message = str(StepFailed("realm:auto:upload", type(missing).__name__, str(missing)))
    row = execution_row(workflow="trigger-rules", status="failed")
    assert replies.failure_code(PLAN, row, "upload", message) == (
        "ENGINE_HANDLER_NOT_REGISTERED",
        message,
    )
