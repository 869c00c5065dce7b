"""Realm's human gates end to end over real HTTP: `confirm_required` with the gate's choices
and claim token, an answer in time (`gate_claim.proof`), a wrong choice, and an answer after
the gate's expiry (never recorded: `answer_recorded:false`, `winning_choice`, `resolved_by`,
`overdue_ms`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_answer_tool import Client
from tests.e2e.test_realm_tools import run_state_until, tool
from tests.mcp_client import McpClient
from tests.specs.realm.test_workflow_files import WORKFLOWS
from tether.runtime.registry import App

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

GATED = """
id: payout
name: Payout
version: 1
steps:
  draft:
    description: Draft the payout
    execution: agent
    trust: human_confirmed
    instructions: Show the amount to the person.
    gate:
      choices: [pay, hold]
      message: Pay it?
      timeout_seconds: {timeout}
      on_expiry: settle_default
      default_choice: hold
  paid:
    description: Only paid payouts go on
    execution: guard
    depends_on: [draft]
    abort_unless: ["draft.choice == 'pay'"]
    abort_message: The payout was held.
"""


def build_app(timeout: int) -> App:
    app = App("realm-gates")
    app.protocol(GATED.format(timeout=timeout))
    return app


async def _open_gate(c: McpClient) -> dict[str, Any]:
    run = (await tool(c, "start_run", {"workflow_id": "payout"}))["run_id"]
    out = await tool(c, "execute_step", {"run_id": run, "command": "draft", "params": {"n": 5}})
    assert out["status"] == "confirm_required"
    return out


async def test_gate_answered_in_time(mcp_server: ServeFn, client: Client) -> None:
    """The reply that opens the gate carries it; an answer with its claim token is matched."""
    async with mcp_server(build_app(3600)) as url:
        c = client(url)
        opened = await _open_gate(c)
        gate = opened["gate"]
        assert "agent_action" not in opened
        assert opened["stopped_step"] == "draft"
        assert opened["context_hint"] == (
            f"Gate '{gate['gate_id']}' waits for a person to pick one of: pay, hold."
        )
        assert gate["choices"] == ["pay", "hold"]
        assert gate["preview"] == {"n": 5}
        assert gate["display"] == "Pay it?"
        assert gate["agent_hint"] == "Show the amount to the person."
        assert "expires_at" in gate
        answer = opened["next_actions"][0]  # the opening reply's
        assert answer["instruction"]["tool"] == "submit_human_response"
        assert answer["instruction"]["call_with"] == {
            "run_id": opened["run_id"],
            "gate_id": gate["gate_id"],
            "choice": "<pay|hold>",
            "claim_token": gate["claim_token"],  # only the opening reply passes it
        }
        assert answer["orientation"] == opened["context_hint"]
        run = opened["run_id"]
        idle = await tool(c, "advance_run", {"run_id": run})  # Realm's advance_run
        assert (idle["status"], idle["context_hint"]) == (
            "ok",
            f"Run '{run}': nothing ran. The gate of step 'draft' is still open (pay, hold); "
            "submit_human_response answers it.",
        )
        assert "claim_token" not in idle["next_actions"][0]["instruction"]["params"]
        nameless = {"run_id": run, "gate_id": gate["gate_id"], "choice": "pay", "responded_by": ""}
        nobody = await tool(c, "submit_human_response", nameless)
        assert (nobody["error_code"], nobody["errors"]) == (
            "VALIDATION_ACTOR_INVALID",
            ["responded_by is empty, so nothing was recorded. Send a name of up to 200 "
             "characters without control characters, or no responded_by at all."],
        )  # fmt: skip
        state = await tool(c, "get_run_state", {"run_id": run})  # the open question, named
        assert state["pending_gate"]["gate_id"] == gate["gate_id"]
        assert "claim_token" not in state["pending_gate"]  # only the opening reply carries it
        assert [a["instruction"]["tool"] for a in state["next_actions"]] == [
            "submit_human_response"
        ]
        assert state["completed_steps"] == []  # the gated step waits on its answer
        assert (state["in_progress_steps"], state["next_actions_status"]) == (
            ["draft"], "awaiting_human",
        )  # fmt: skip
        stored = state["pending_gate"]  # the gate's settings, copied into the run as it opened
        assert state["step_claims"] == [  # Realm's run state
            {
                "step": "draft",
                "holder": {"by": None, "absent_cause": "driver_not_recorded"},
                "since": stored["opened_at"],
            }
        ]
        assert "run_health" not in state and "engine_runnable" not in state
        assert stored["opened_at"] and stored["resolved_message"] == "Pay it?"
        assert (stored["on_expiry"], stored["default_choice"]) == ("settle_default", "hold")
        early = await tool(c, "execute_step", {"run_id": run, "command": "paid"})
        assert (early["status"], early["agent_action"]) == ("blocked", "resolve_precondition")
        assert "the gate of step 'draft' (pay, hold)" in early["context_hint"]
        assert early["blocked_reason"]["suggestion"] == (
            "Answer the open question first, as next_actions says."
        )
        assert early["next_actions"][0]["instruction"]["tool"] == "submit_human_response"
        bad = await tool(
            c, "submit_human_response", {"run_id": run, "gate_id": gate["gate_id"], "choice": "x"}
        )
        assert bad["error_code"] == "VALIDATION_INPUT_SCHEMA"
        assert bad["errors"] == ["'x' is not a choice of this gate; its choices are: pay, hold"]
        assert bad["command"] == "draft"  # Realm's contract: an answer's reply names the step
        wrong = await tool(
            c, "submit_human_response", {"run_id": run, "gate_id": "g9", "choice": "pay"}
        )
        assert (wrong["command"], wrong["error_code"], wrong["agent_action"]) == (
            "submit_gate", "STATE_BLOCKED", "resolve_precondition",
        )  # fmt: skip
        assert wrong["context_hint"] == (
            "'g9' is neither this run's open gate nor one it has answered. The open gate is the "
            f"one of step 'draft' (gate '{gate['gate_id']}'); answer it as next_actions shows."
        )
        held = await tool(c, "abandon_run", {"run_id": run})  # Realm: a gate holds the run
        assert held["error_code"] == "STATE_TRANSITION_DENIED"
        assert held["errors"] == [
            f"Run '{run}' cannot be abandoned while the gate of step 'draft' (gate "
            f"'{gate['gate_id']}') waits for an answer. Answer it first: submit_human_response "
            f"{{run_id: '{run}', gate_id: '{gate['gate_id']}', choice: <one of: pay, hold>}}."
        ]
        assert held["context_hint"] == (
            f"Run '{run}' waits for a person's answer at a gate; answer it before abandoning the "
            "run."
        )
        args = {"run_id": run, "gate_id": gate["gate_id"], "choice": "pay"}
        ok = await tool(c, "submit_human_response", {**args, "claim_token": gate["claim_token"]})
        assert (ok["status"], ok["command"]) == ("ok", "draft")
        assert ok["run_phase"] == "completed"
        assert ok["context_hint"] == "Guard step 'paid' passed and completed the run."
        assert ok["ended_by"] == {"arm": "guard_pass_complete", "step": "paid"}
        assert ok["gate_claim"]["proof"] == "matched"
        steps = (await tool(c, "get_run_state", {"run_id": run, "include_steps": True}))["steps"]
        assert steps["draft"]["answers"] == [  # Realm's run state, include_steps
            {
                "choice": "pay",
                "answered_by": {"by": "dev", "by_source": "stated"},  # the caller's principal
                "claim_proof_absent": "proof_not_recorded",
            }
        ]
        assert "answer_recorded" not in ok
        again = await tool(c, "submit_human_response", args)
        assert again["status"] == "ok"
        assert again["gate_claim"] == {"proof": "spent", "cause": "answered", "opened_by": None}
        assert again["context_hint"] == (
            f"Gate '{gate['gate_id']}' was already resolved with choice 'pay' — no action was "
            "taken."
        )
        other = await tool(c, "submit_human_response", {**args, "choice": "hold"})
        assert other["error_code"] == "STATE_BLOCKED"
        assert other["agent_action"] == "report_to_user"
        assert other["errors"] == [
            f"Your choice 'hold' was not recorded: gate '{gate['gate_id']}' had already been "
            "answered with 'pay'."
        ]


async def test_gate_answered_after_its_expiry(mcp_server: ServeFn, client: Client) -> None:
    """A late answer is never recorded: the expiry recorded the default choice."""
    async with mcp_server(build_app(1)) as url:
        c = client(url)
        opened = await _open_gate(c)
        run, gate_id = opened["run_id"], opened["gate"]["gate_id"]
        # the worker carries out the expiry at the deadline
        await run_state_until(c, run, lambda s: s["terminal_state"])
        args = {"run_id": run, "gate_id": gate_id, "choice": "pay"}
        late = await tool(c, "submit_human_response", args)
        assert late["error_code"] == "STATE_BLOCKED"
        assert late["error_details"] == {"winning_choice": "hold", "resolved_by": "timeout"}
        assert late["errors"] == [  # Realm: an earlier call carried the expiry out
            f"Your choice 'pay' was not recorded: gate '{gate_id}' had run out of time and took "
            "its default, 'hold'."
        ]
        same = await tool(c, "submit_human_response", {**args, "choice": "hold"})
        assert (same["status"], same["command"]) == ("ok", "draft")
        assert same["answer_recorded"] is False
        assert same["error_details"]["winning_choice"] == "hold"
        assert same["context_hint"] == (
            "The gate's time ran out before your answer came, and its default is the choice you "
            "sent: the default was recorded, not your answer."
        )
        state = await tool(c, "get_run_state", {"run_id": run})
        assert state["run_phase"] == "aborted"  # the guard read draft.choice == 'hold'


async def test_an_answer_without_the_claim_token_is_recorded_and_says_so(
    mcp_server: ServeFn, client: Client
) -> None:
    """No claim_token, or another gate's: the answer is recorded all the same, and the warning
    says so in the fixed wording clients match."""
    async with mcp_server(build_app(3600)) as url:
        c = client(url)
        opened = await _open_gate(c)
        args = {"run_id": opened["run_id"], "gate_id": opened["gate"]["gate_id"], "choice": "pay"}
        bare = await tool(c, "submit_human_response", args)
        assert (bare["status"], bare["run_phase"]) == ("ok", "completed")
        assert "answer_recorded" not in bare
        assert bare["gate_claim"] == {"proof": "absent", "opened_by": None}
        (said,) = bare["warnings"]
        assert said.startswith("No claim_token was passed; the answer was recorded. ")
        opened = await _open_gate(c)
        args = {"run_id": opened["run_id"], "gate_id": opened["gate"]["gate_id"], "choice": "pay"}
        wrong = await tool(c, "submit_human_response", {**args, "claim_token": "not-it"})
        assert (wrong["status"], wrong["run_phase"]) == ("ok", "completed")
        assert wrong["gate_claim"] == {"proof": "mismatch", "opened_by": None}
        assert wrong["warnings"] == [
            "The claim_token passed is not this question's; the answer was recorded."
        ]


async def test_a_claim_token_for_a_settled_gate_is_spent_with_a_warning(
    mcp_server: ServeFn, client: Client
) -> None:
    """A token passed to a gate an earlier answer or its expiry settled cannot be checked: a
    warning in the fixed wording; without a token there is nothing to warn of."""
    async with mcp_server(build_app(3600)) as url:
        c = client(url)
        opened = await _open_gate(c)
        token = opened["gate"]["claim_token"]
        args = {"run_id": opened["run_id"], "gate_id": opened["gate"]["gate_id"], "choice": "pay"}
        first = await tool(c, "submit_human_response", {**args, "claim_token": token})
        assert (first["gate_claim"]["proof"], first["warnings"]) == ("matched", [])
        again = await tool(c, "submit_human_response", {**args, "claim_token": token})
        assert again["gate_claim"] == {"proof": "spent", "cause": "answered", "opened_by": None}
        assert again["warnings"] == [
            "The claim_token could not be checked: this question was already settled by an "
            "earlier answer."
        ]
        bare = await tool(c, "submit_human_response", args)
        assert (bare["gate_claim"]["proof"], bare["warnings"]) == ("spent", [])
    async with mcp_server(build_app(1)) as url:
        c = client(url)
        opened = await _open_gate(c)
        run, token = opened["run_id"], opened["gate"]["claim_token"]
        # the worker carries out the expiry at the deadline
        await run_state_until(c, run, lambda s: s["terminal_state"])
        args = {"run_id": run, "gate_id": opened["gate"]["gate_id"], "choice": "hold"}
        late = await tool(c, "submit_human_response", {**args, "claim_token": token})
        assert (late["status"], late["answer_recorded"]) == ("ok", False)
        assert late["gate_claim"] == {"proof": "spent", "cause": "expired", "opened_by": None}
        assert late["warnings"] == [
            "The claim_token could not be checked: this question was already settled by its expiry."
        ]


async def test_a_prompt_and_a_gate_message_reach_the_agent_rendered(
    mcp_server: ServeFn, client: Client
) -> None:
    """A prompt's `{{ run.params.subject }}` and a gate message's
    `{{ context.resources.compose.headline | upper }}` reach the agent rendered; a message whose
    path resolves to nothing keeps the gate shut (GATE_MESSAGE_UNRESOLVABLE), leaving the run open
    and the step unfinished."""
    app = App("realm-rendering")
    app.protocol(WORKFLOWS / "prompt-params.yaml")
    app.protocol(WORKFLOWS / "gate-message.yaml")
    broken = (WORKFLOWS / "gate-message.yaml").read_text(encoding="utf-8")
    app.protocol(
        broken.replace("id: gate-message", "id: broken").replace(".details }}", ".detail }}")
    )
    async with mcp_server(app) as url:
        c = client(url)
        params = {"subject": "tides"}
        started = await tool(c, "start_run", {"workflow_id": "prompt-params", "params": params})
        assert started["next_actions"][0]["prompt"] == (
            "Pick three to six questions that show whether someone knows tides.\n"
        )
        run = (await tool(c, "start_run", {"workflow_id": "gate-message"}))["run_id"]
        notice = {"headline": "Login down tonight", "details": "From 22:00 to 23:00."}
        args = {"run_id": run, "command": "compose", "params": notice}
        opened = await tool(c, "execute_step", args)
        assert opened["gate"]["display"] == "LOGIN DOWN TONIGHT\n----\nFrom 22:00 to 23:00.\n"
        state = await tool(c, "get_run_state", {"run_id": run})
        assert state["pending_gate"]["display"] == opened["gate"]["display"]
        gate_id = opened["gate"]["gate_id"]
        answer = {"run_id": run, "gate_id": gate_id, "choice": "put_up"}
        done = await tool(c, "submit_human_response", answer)
        assert done["run_phase"] == "completed"

        run = (await tool(c, "start_run", {"workflow_id": "broken"}))["run_id"]
        failed = await tool(c, "execute_step", {**args, "run_id": run})
        assert (failed["status"], failed["agent_action"]) == ("error", "stop"), failed
        assert (failed["error_code"], failed["stopped_step"]) == (
            "GATE_MESSAGE_UNRESOLVABLE", "sign_off",
        )  # fmt: skip
        assert failed["errors"] == [
            "gate.message refers to something the run does not have: "
            "context.resources.compose.detail"
        ]
        state = await tool(c, "get_run_state", {"run_id": run})  # the run stays open
        assert (state["run_phase"], state["completed_steps"]) == ("running", ["compose"])


async def test_a_gated_agent_step_between_handlers_end_to_end(
    mcp_server: ServeFn, client: Client
) -> None:
    """input_map feeds each handler, the gated agent step's answer must fit its input_schema,
    the gate message is rendered with `upper` and `bullets`, and the accepted writes run."""
    got: dict[str, Any] = {}
    app = App("realm-intake")
    app.protocol(WORKFLOWS / "gated-agent-step.yaml")

    def keep(name: str, out: dict[str, Any]) -> Any:
        def handler(inputs: dict[str, Any]) -> dict[str, Any]:
            got[name] = inputs["params"]  # what input_map assembled for the step
            return out

        return handler

    app.handler("read_sample")(keep("read", {"label": "S-12 serum", "notes": "Cold chain ok."}))
    app.handler("book_slot")(keep("slot", {}))
    app.handler("write_tags")(keep("tags", {}))
    async with mcp_server(app) as url:
        c = client(url)
        params = {"lab": "north", "sample_id": 12}
        started = await tool(c, "start_run", {"workflow_id": "gated-agent-step", "params": params})
        assert got["read"] == params  # input_map: run.params.lab, run.params.sample_id
        prompt = started["next_actions"][0]["prompt"]
        assert prompt.startswith(
            "Sample 12 came in at north.\nLabel: S-12 serum\nIntake notes: Cold chain ok.\n"
        )
        run = started["run_id"]
        answer = {"hazard": "low", "tags": ["serum", "B2"], "summary": "Routine serum."}
        call = {"run_id": run, "command": "classify_sample"}
        bad = await tool(c, "execute_step", {**call, "params": {**answer, "hazard": "mild"}})
        assert bad["error_code"] == "VALIDATION_INPUT_SCHEMA"
        opened = await tool(c, "execute_step", {**call, "params": answer})
        assert opened["gate"]["display"] == (
            "Sample 12 (north)\nHazard: LOW\nTags:\n• serum\n• B2\nRoutine serum.\n"
        )
        gate = {"run_id": run, "gate_id": opened["gate"]["gate_id"], "choice": "accept"}
        done = await tool(c, "submit_human_response", gate)
        assert done["run_phase"] == "completed", done
        assert got["slot"] == {**params, "note": "Routine serum."}
        assert got["tags"] == {"sample_id": 12, "tags": ["serum", "B2"]}


async def test_list_workflows_names_the_protocol_files_it_could_not_read(
    mcp_server: ServeFn, client: Client, tmp_path: Path
) -> None:
    """A file `--protocols` refused is in `unreadable`, with a warning, and the hint stops
    steering to create_workflow."""
    for name in ("gate-message.yaml", "services-block.yaml"):
        (tmp_path / name).write_text((WORKFLOWS / name).read_text("utf-8"), "utf-8")
    app = App("realm-listing")
    app.allow_create_workflow = True
    assert list(app.load_protocols(tmp_path)) == [str(tmp_path / "services-block.yaml")]
    async with mcp_server(app) as url:
        listed = await tool(client(url), "list_workflows", {})
    assert [w["id"] for w in listed["workflows"]] == ["gate-message"]
    (entry,) = listed["unreadable"]
    assert (entry["file"], entry["class"]) == ("services-block.yaml", "parse")
    assert "'services' is outside Tether's subset" in entry["reason"]
    assert listed["warnings"] == ["1 workflow file could not be loaded; 'unreadable' lists it."]
    assert "Do not stand in for one of them with create_workflow" in listed["hint"]
