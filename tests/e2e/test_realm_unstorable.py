"""Input the store cannot hold, over real HTTP: an answer over the payload limit, or text with
U+0000, is refused with what is wrong and is not counted as the agent's refused answer; the
same input to start_run, start_run_batch and a trace is refused in the envelope."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_answer_tool import Client
from tests.e2e.test_realm_parallel import build_app
from tests.e2e.test_realm_tools import tool

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

LIMIT = 4096


async def test_an_oversized_answer_names_the_limit_and_six_of_them_do_not_fail_the_step(
    mcp_server: ServeFn, client: Client
) -> None:
    """Our choice: the payload limit is a transport limit, not the step's schema; Realm counts
    only schema refusals against validation_exhaustion (threshold 6)."""
    async with mcp_server(build_app([]), max_payload_bytes=LIMIT) as url:
        c = client(url)
        started = await tool(c, "start_run", {"workflow_id": "two-readers"})
        run = started["run_id"]
        big = {"cents": 1, "note": "x" * LIMIT}
        for _ in range(6):
            refused = await tool(
                c, "execute_step", {"run_id": run, "command": "read_price", "params": big}
            )
            assert (refused["status"], refused["error_code"], refused["agent_action"]) == (
                "error",
                "RESOURCE_TOO_LARGE",
                "provide_input",
            )
            assert refused["error_details"] == {"limit_bytes": LIMIT, "size_bytes": LIMIT + 21}
            assert refused["errors"] == [
                f"Step 'read_price': the answer is {LIMIT + 21} bytes, over this server's limit "
                f"of {LIMIT} bytes (TETHER_MAX_PAYLOAD_BYTES). Nothing was recorded. It does not "
                "count against the step's refused answers."
            ]
            assert refused["run_version"] == started["run_version"]
        done = await tool(
            c, "execute_step", {"run_id": run, "command": "read_price", "params": {"cents": 1}}
        )
        assert (done["status"], done["run_phase"]) == ("ok", "running")
        steps = await tool(c, "get_run_state", {"run_id": run, "include_steps": True})
        assert steps["steps"]["read_price"]["attempts"] == [
            {"attempt": 1, "status": "success", "cost_unrecorded": "not_driven_by_realm"}
        ]


async def test_an_answer_with_a_nul_character_says_where_and_is_not_a_refused_answer(
    mcp_server: ServeFn, client: Client
) -> None:
    """PostgreSQL cannot store U+0000 in text: the reply names where it is; the next schema
    refusal is the step's first."""
    async with mcp_server(build_app([])) as url:
        c = client(url)
        run = (await tool(c, "start_run", {"workflow_id": "two-readers"}))["run_id"]
        nul = {"run_id": run, "command": "read_terms", "params": {"fair": True, "why": ["ok\x00"]}}
        refused = await tool(c, "execute_step", nul)
        assert (refused["error_code"], refused["agent_action"]) == (
            "VALIDATION_UNSTORABLE_TEXT",
            "provide_input",
        )
        assert refused["error_details"] == {"character": "U+0000", "at": "/why/0"}
        wrong = {"run_id": run, "command": "read_terms", "params": {"fair": "yes"}}
        schema = await tool(c, "execute_step", wrong)
        assert schema["error_code"] == "VALIDATION_OUTPUT_SCHEMA"
        assert (schema["error_details"]["rejections"], schema["error_details"]["threshold"]) == (
            1,
            6,
        )


async def test_unstorable_params_and_traces_are_refused_in_the_envelope(
    mcp_server: ServeFn, client: Client
) -> None:
    """start_run, start_run_batch, append_trace and an execute_step trace refuse text with
    U+0000 as a Realm reply (not a generic tool error), and nothing is created or kept."""
    async with mcp_server(build_app([])) as url:
        c = client(url)
        bad = {"label": "a\x00b"}
        start = await tool(c, "start_run", {"workflow_id": "two-readers", "params": bad})
        assert (start["run_id"], start["error_code"], start["error_details"]) == (
            "",
            "VALIDATION_UNSTORABLE_TEXT",
            {"character": "U+0000", "at": "/params/label"},
        )
        items = [{"params": {}}, {"params": bad}]
        batch = await tool(c, "start_run_batch", {"workflow_id": "two-readers", "items": items})
        assert (batch["error_code"], batch["errors"]) == (
            "VALIDATION_UNSTORABLE_TEXT",
            [
                "The params of item 1 holds the NUL character (U+0000) at '/params/label', "
                "which cannot be stored. Nothing was recorded. No run was created."
            ],
        )
        run = (await tool(c, "start_run", {"workflow_id": "two-readers"}))["run_id"]
        entry = [{"event": "note", "data": {"text": "\x00"}}]
        traced = await tool(
            c, "append_trace", {"run_id": run, "step_id": "read_terms", "entries": entry}
        )
        assert (traced["status"], traced["error_code"], traced["error_details"]["at"]) == (
            "error",
            "VALIDATION_UNSTORABLE_TEXT",
            "/entries/0/data/text",
        )
        sent = await tool(
            c,
            "execute_step",
            {"run_id": run, "command": "read_terms", "params": {"fair": True}, "trace": entry},
        )
        assert (sent["error_code"], sent["stopped_step"]) == (
            "VALIDATION_UNSTORABLE_TEXT",
            "read_terms",
        )
        state = await tool(c, "get_run_state", {"run_id": run})
        assert state["completed_steps"] == []
