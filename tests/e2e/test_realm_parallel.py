"""Agent steps with no order between them, over real HTTP: both are offered at once and two
agents answer them concurrently; every answer is recorded and the step after both runs once
(as Realm does, every agent step that can run is offered)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_answer_tool import Client
from tests.e2e.test_realm_tools import tool
from tether.runtime.registry import App

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

ROUNDS = 10

PROTOCOL = """
id: two-readers
name: Two readers, one verdict
version: 1
steps:
  read_terms:
    description: Read the terms of the offer
    execution: agent
    output_schema:
      type: object
      properties: {fair: {type: boolean}}
      required: [fair]
  read_price:
    description: Read the price list
    execution: agent
    output_schema:
      type: object
      properties: {cents: {type: integer}}
      required: [cents]
  verdict:
    description: Weigh both readings
    execution: auto
    handler: weigh
    depends_on: [read_terms, read_price]
"""


def build_app(weighed: list[dict[str, Any]]) -> App:
    app = App("realm-parallel")
    app.protocol(PROTOCOL)

    @app.handler()
    def weigh(inputs: dict[str, Any]) -> dict[str, Any]:
        steps = inputs["steps"]
        weighed.append(steps)
        return {"buy": steps["read_terms"]["fair"] and steps["read_price"]["cents"] < 500}

    return app


async def test_two_agents_answer_parallel_steps_at_once_and_the_fan_in_runs_once(
    mcp_server: ServeFn, client: Client
) -> None:
    """Realm's eligibility: every agent step whose dependencies hold is offered; both answers
    count, whichever lands first, and the fan-in runs once per run."""
    weighed: list[dict[str, Any]] = []
    async with mcp_server(build_app(weighed)) as url:
        first, second = client(url), client(url)
        for n in range(ROUNDS):
            started = await tool(first, "start_run", {"workflow_id": "two-readers"})
            run = started["run_id"]
            assert started["context_hint"] == (
                f"Run '{run}' created for workflow 'two-readers'. Steps for the agent: "
                "'read_terms', 'read_price'."
            )
            offered = [a["instruction"]["params"]["command"] for a in started["next_actions"]]
            assert offered == ["read_terms", "read_price"]

            terms, price = await asyncio.gather(
                tool(
                    first,
                    "execute_step",
                    {"run_id": run, "command": "read_terms", "params": {"fair": True}},
                ),
                tool(
                    second,
                    "execute_step",
                    {"run_id": run, "command": "read_price", "params": {"cents": 100 + n}},
                ),
            )
            assert (terms["status"], price["status"]) == ("ok", "ok"), (terms, price)
            assert "error_code" not in terms and "error_code" not in price

            state = await tool(first, "get_run_state", {"run_id": run})
            assert state["run_phase"] == "completed", state
            assert state["completed_steps"] == ["read_terms", "read_price", "verdict"]
            assert state["evidence_count"] == 3
        assert weighed == [
            {"read_terms": {"fair": True}, "read_price": {"cents": 100 + n}} for n in range(ROUNDS)
        ]


async def test_a_parallel_step_left_open_is_offered_again_after_the_other_is_answered(
    mcp_server: ServeFn, client: Client
) -> None:
    """After one of two ready steps is answered, the other is still offered by name, and
    answering the one already done is refused as settled."""
    async with mcp_server(build_app([])) as url:
        c = client(url)
        started = await tool(c, "start_run", {"workflow_id": "two-readers"})
        run = started["run_id"]
        one = await tool(
            c, "execute_step", {"run_id": run, "command": "read_price", "params": {"cents": 9}}
        )
        assert (
            one["context_hint"] == "Step 'read_price' is done. Steps for the agent: 'read_terms'."
        )
        assert [a["instruction"]["params"]["command"] for a in one["next_actions"]] == [
            "read_terms"
        ]
        again = await tool(
            c, "execute_step", {"run_id": run, "command": "read_price", "params": {"cents": 9}}
        )
        assert again["status"] == "blocked"
        assert again["blocked_reason"]["eligible_steps"] == ["read_terms"]
        last = await tool(
            c, "execute_step", {"run_id": run, "command": "read_terms", "params": {"fair": False}}
        )
        assert (last["status"], last["run_phase"]) == ("ok", "completed")
        assert last["chained_auto_steps"] == [{"step": "verdict", "run_phase": "completed"}]


async def test_a_parallel_step_that_spends_its_refusals_fails_the_run_with_the_other_open(
    mcp_server: ServeFn, client: Client
) -> None:
    """Realm's validation_exhaustion: the sixth refused answer fails the run at once, while
    the other ready step is still unanswered."""
    async with mcp_server(build_app([])) as url:
        c = client(url)
        run = (await tool(c, "start_run", {"workflow_id": "two-readers"}))["run_id"]
        wrong = {"run_id": run, "command": "read_terms", "params": {"fair": "yes"}}
        for _ in range(5):
            assert (await tool(c, "execute_step", wrong))["agent_action"] == "provide_input"
        spent = await tool(c, "execute_step", wrong)
        assert (spent["error_code"], spent["agent_action"]) == ("VALIDATION_EXHAUSTED", "stop")
        assert spent["run_phase"] == "failed"
        state = await tool(c, "get_run_state", {"run_id": run})
        assert (state["failed_steps"], state["completed_steps"]) == (["read_terms"], [])
