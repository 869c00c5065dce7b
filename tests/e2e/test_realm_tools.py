"""Realm's step-protocol tools end to end over real HTTP: an agent run with a refused then
accepted answer, an auto chain, a guard that aborts, abandon_run, the same run read through
tasks/get, and parameter refusals as JSON-RPC -32602."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_answer_tool import PLAIN, TASKS_ONLY, Client
from tests.mcp_client import McpClient
from tests.waiting import until
from tether.jsonrpc import codes
from tether.runtime.registry import App

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

PROTOCOL = """
id: expense
name: Expense claim
version: 1
params_schema:
  type: object
  properties: {amount: {type: integer}}
  required: [amount]
steps:
  rate:
    description: Rate the expense claim
    execution: agent
    output_schema:
      type: object
      properties: {band: {type: string, enum: [small, large]}}
      required: [band]
  score:
    description: Score it
    execution: auto
    handler: score
    depends_on: [rate]
  small_claims_only:
    description: A large claim waits for a person instead
    execution: guard
    depends_on: [score]
    abort_unless: ["rate.band == 'small'"]
    abort_message: A large claim is left to a person.
  confirm:
    description: Write the confirmation
    execution: agent
    depends_on: [small_claims_only]
"""


def build_app() -> App:
    app = App("realm-e2e")
    app.protocol(PROTOCOL)

    @app.handler()
    def score(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"points": inputs["params"]["amount"] * 2}

    return app


async def tool(c: McpClient, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await c.result("tools/call", {"name": name, "arguments": args}, capabilities=PLAIN)
    assert len(result["content"]) == 1, result
    assert result["isError"] is False, result
    reply: dict[str, Any] = orjson.loads(result["content"][0]["text"])
    return reply


async def run_state_until(
    c: McpClient,
    run: str,
    done: Callable[[dict[str, Any]], object],
    *,
    include_steps: bool = False,
    timeout: float = 15.0,
) -> dict[str, Any]:
    """`get_run_state` of `run`, asked again until `done(state)` holds (the server's workers
    move the run on); that state."""
    args: dict[str, Any] = {"run_id": run, **({"include_steps": True} if include_steps else {})}

    async def reached() -> dict[str, Any] | None:
        state = await tool(c, "get_run_state", args)
        return state if done(state) else None

    return await until(reached, timeout=timeout, every=0.05, what=f"the state of run {run}")


async def test_agent_run_refused_then_accepted_auto_chain_and_tasks_get(
    mcp_server: ServeFn, client: Client
) -> None:
    async with mcp_server(build_app()) as url:
        c = client(url)
        listed = await tool(c, "list_workflows", {})
        assert listed["workflows"] == [{"id": "expense", "name": "Expense claim", "version": 1}]
        assert listed["hint"] == (  # Realm's hint when create_workflow is not served
            "Read a workflow's brief with get_workflow_protocol before you call start_run on it."
        )
        started = await tool(c, "start_run", {"workflow_id": "expense", "params": {"amount": 3}})
        assert started["status"] == "ok"
        assert started["deduped"] is False
        run = started["run_id"]
        (action,) = started["next_actions"]
        assert action["instruction"]["params"] == {"run_id": run, "command": "rate"}

        task = await c.result("tasks/get", {"taskId": run}, capabilities=TASKS_ONLY)
        assert task["status"] in ("working", "input_required")
        early = await tool(c, "execute_step", {"run_id": run, "command": "confirm"})
        assert early["context_hint"] == (  # then what comes next
            "Step 'confirm' cannot be called now: it waits for 'small_claims_only' to finish. "
            "Steps for the agent: 'rate'."
        )

        refused = await tool(
            c, "execute_step", {"run_id": run, "command": "rate", "params": {"band": "medium"}}
        )
        assert refused["status"] == "error"
        assert refused["error_code"] == "VALIDATION_OUTPUT_SCHEMA"
        assert refused["agent_action"] == "provide_input"
        assert (refused["errors"], refused["context_hint"]) == (  # Realm's refused answer
            ["The answer for step 'rate' does not fit its output_schema"],
            "Step 'rate' refused the answer; the run is still running.",
        )
        assert refused["run_version"] == started["run_version"]  # refused: nothing changed

        done = await tool(
            c, "execute_step", {"run_id": run, "command": "rate", "params": {"band": "small"}}
        )
        assert done["status"] == "ok", done
        assert [s["step"] for s in done["chained_auto_steps"]] == ["score", "small_claims_only"]
        assert done["guards"] == [{"step": "small_claims_only", "outcome": "pass"}]
        assert done["next_actions"][0]["instruction"]["params"]["command"] == "confirm"
        assert done["run_version"] > started["run_version"]
        # the last step the call completed, then what comes next
        assert done["context_hint"] == "Step 'score' is done. Steps for the agent: 'confirm'."
        assert done["next_actions"][0]["human_readable"] == (
            "Do step 'confirm' with execute_step: Write the confirmation"
        )
        idle = await tool(c, "advance_run", {"run_id": run})  # nothing owed: never an error
        assert idle["context_hint"] == f"Run '{run}': nothing ran. Steps for the agent: 'confirm'."

        again = await tool(
            c, "execute_step", {"run_id": run, "command": "rate", "params": {"band": "small"}}
        )
        assert again["status"] == "blocked"
        assert again["blocked_reason"]["eligible_steps"] == ["confirm"]
        assert again["context_hint"] == (
            "Step 'rate' cannot be called now: it is done already. Steps for the agent: 'confirm'."
        )
        assert again["stopped_step"] == "rate"

        end = await tool(
            c, "execute_step", {"run_id": run, "command": "confirm", "params": {"text": "paid"}}
        )
        assert end["status"] == "ok"
        assert end["run_phase"] == "completed"
        task = await c.result("tasks/get", {"taskId": run}, capabilities=TASKS_ONLY)
        assert task["status"] == "completed"
        state = await tool(c, "get_run_state", {"run_id": run})
        assert state["completed_steps"] == ["rate", "score", "small_claims_only", "confirm"]
        assert state["terminal_state"] is True


async def test_guard_aborts_and_abandon(mcp_server: ServeFn, client: Client) -> None:
    async with mcp_server(build_app()) as url:
        c = client(url)
        run = (await tool(c, "start_run", {"workflow_id": "expense", "params": {"amount": 1}}))[
            "run_id"
        ]
        out = await tool(
            c, "execute_step", {"run_id": run, "command": "rate", "params": {"band": "large"}}
        )
        assert out["status"] == "ok"
        assert out["run_phase"] == "aborted"
        assert out["context_hint"] == "Guard step 'small_claims_only' aborted the run."
        assert out["ended_by"] == {
            "arm": "guard_abort",
            "step": "small_claims_only",
            "reason": "A large claim is left to a person.",
        }
        late = await tool(c, "execute_step", {"run_id": run, "command": "confirm", "params": {}})
        assert late["status"] == "ok"
        assert late["agent_action"] == "stop"
        terminal = await tool(c, "abandon_run", {"run_id": run})
        assert terminal["error_code"] == "STATE_RUN_TERMINAL"
        assert "run_version" not in terminal
        assert terminal["errors"] == [
            f"Run '{run}' has already ended (aborted); there is nothing to abandon."
        ]
        assert terminal["context_hint"] == f"Run '{run}' has already ended; nothing to abandon."

        other = await tool(c, "start_run", {"workflow_id": "expense", "params": {"amount": 1}})
        gone = await tool(c, "abandon_run", {"run_id": other["run_id"], "reason": "no longer"})
        kill = (  # Realm's abandon_run: the summary alone, with its note
            "Abandoning stops the run where it stands: its finalizers, if it has any, did not "
            "run and never will. A run that should end with its finalizers is ended by one of "
            "its own guard steps (abort_unless); operators have no abort command."
        )
        assert gone == {
            "run_id": other["run_id"],
            "run_phase": "abandoned",
            "terminal_state": True,
            "terminal_reason": "no longer",
            "note": kill,
        }
        twice = await tool(c, "abandon_run", {"run_id": other["run_id"]})
        assert twice["note"] == f"already abandoned (no change this call). {kill}"


async def test_refusals(mcp_server: ServeFn, client: Client) -> None:
    async with mcp_server(build_app()) as url:
        c = client(url)
        body = await c.call(
            "tools/call", {"name": "execute_step", "arguments": {"run_id": "x"}}, capabilities=PLAIN
        )
        assert body["error"]["code"] == codes.INVALID_PARAMS
        for name, arguments, problem in (  # Realm's zod schemas: steps.min(1), positive()
            ("create_workflow", {"steps": []}, "Array must contain at least 1 element(s)"),
            (
                "start_run_batch",
                {"workflow_id": "expense", "items": [], "max_items": 0},
                "Number must be greater than 0",
            ),
        ):
            body = await c.call(
                "tools/call", {"name": name, "arguments": arguments}, capabilities=PLAIN
            )
            assert body["error"]["code"] == codes.INVALID_PARAMS, body
            assert problem in body["error"]["message"]
        bad = await tool(c, "start_run", {"workflow_id": "expense", "params": {}})
        assert (bad["error_code"], bad["run_id"]) == ("VALIDATION_INPUT_SCHEMA", "")
        assert bad["errors"] == [  # Realm's params check, in Ajv's words
            "The params do not fit the params_schema of workflow 'expense': (root) must have "
            "required property 'amount'"
        ]
        missing = await tool(c, "start_run", {"workflow_id": "nope"})
        assert missing["error_code"] == "STATE_WORKFLOW_NOT_FOUND"
        unknown = await tool(c, "execute_step", {"run_id": "ex_nope", "command": "rate"})
        assert unknown["error_code"] == "STATE_RUN_NOT_FOUND"
        assert unknown["errors"] == ["Run not found: ex_nope"]  # Realm's run state
        assert unknown["agent_action"] == "report_to_user"
        runs = await tool(c, "get_run_state", {"run_id": "ex_nope"})
        assert "run_version" not in runs


SLOW = """
id: slow
name: Slow
version: 1
steps:
  fetch:
    description: Fetch slowly
    execution: auto
    handler: crawl
    timeout_seconds: 1
"""


async def test_an_unknown_workflow_is_refused_in_the_words_agents_match(
    mcp_server: ServeFn, client: Client
) -> None:
    """An unknown workflow id: the hint `Workflow '<id>' not found.` and the error
    `Workflow not found: <id>` (the fixed wording clients match), from every tool that takes
    one."""
    async with mcp_server(build_app()) as url:
        c = client(url)
        for name, args in (
            ("start_run", {"workflow_id": "nope"}),
            ("start_run_batch", {"workflow_id": "nope", "items": [{"params": {}}]}),
        ):
            missing = await tool(c, name, args)
            assert (missing["error_code"], missing["run_id"]) == ("STATE_WORKFLOW_NOT_FOUND", "")
            assert missing["context_hint"] == "Workflow 'nope' not found."
            assert missing["errors"] == ["Workflow not found: nope"]
        brief = await c.result(
            "tools/call",
            {"name": "get_workflow_protocol", "arguments": {"workflow_id": "nope"}},
            capabilities=PLAIN,
        )
        assert brief["isError"] is True
        assert brief["content"] == [{"type": "text", "text": "Error: Workflow not found: nope"}]


async def test_an_auto_step_past_its_timeout_fails_the_run(
    mcp_server: ServeFn, client: Client
) -> None:
    """`timeout_seconds` bounds one attempt: past it the step fails with STEP_TIMEOUT."""
    app = App("realm-slow")
    app.protocol(SLOW)

    @app.handler()
    async def crawl(inputs: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(30)  # time is the subject: longer than the step's timeout
        return {}

    async with mcp_server(app) as url:
        started = await tool(client(url), "start_run", {"workflow_id": "slow"})
        assert (started["status"], started["run_phase"]) == ("error", "failed"), started
        assert (started["error_code"], started["stopped_step"]) == ("STEP_TIMEOUT", "fetch")
        assert started["errors"] == ["Step 'fetch' ran past its limit of 1000ms"]
        assert started["agent_action"] == "stop"


BUDGET = """
id: budget
name: Budget
version: 1
steps:
  title:
    description: Give the report a headline.
    execution: agent
    input_schema:
      type: object
      additionalProperties: false
      required: [headline]
      properties:
        headline: {type: string, minLength: 12}
    validation_exhaustion: {threshold: 2}
  guess:
    description: Guess, with a default
    execution: agent
    depends_on: [title]
    output_schema:
      type: object
      required: [n]
      properties: {n: {type: integer}}
    validation_exhaustion: {threshold: 1, mode: default, default_output: {n: 0}}
  tidy:
    description: Tidy up after a failure
    execution: finalizer
    handler: tidy
    on_outcome: fail
"""


async def test_refused_answers_are_counted_up_to_the_step_budget(
    mcp_server: ServeFn, client: Client
) -> None:
    """Each refusal is counted (`rejections`/`threshold`, Ajv errors);
    at the threshold `mode: fail` ends the run (VALIDATION_EXHAUSTED, stop) and `mode: default`
    completes the step with its default_output."""
    app = App("realm-budget")
    app.protocol(BUDGET)
    tidied: list[int] = []

    @app.handler()
    def tidy(inputs: dict[str, Any]) -> dict[str, Any]:
        tidied.append(1)
        return {}

    handled = BUDGET.replace("id: budget", "id: budget_handled")
    handled = handled.replace(
        "depends_on: [title]\n    output", "depends_on: [fallback]\n    output"
    )
    handled = handled.replace(
        "  tidy:\n",
        "  fallback:\n    description: Go on without it\n    execution: auto\n"
        "    depends_on: [title]\n    trigger_rule: one_failed\n  tidy:\n",
    )
    app.protocol(handled)
    async with mcp_server(app) as url:
        c = client(url)
        run = (await tool(c, "start_run", {"workflow_id": "budget"}))["run_id"]
        short = {"run_id": run, "command": "title", "params": {"headline": "Too short"}}
        first = await tool(c, "execute_step", short)
        assert first["error_code"] == "VALIDATION_INPUT_SCHEMA"
        assert (first["error_details"]["rejections"], first["stopped_step"]) == (1, "title")
        assert first["error_details"]["threshold"] == 2
        (error,) = first["error_details"]["errors"]
        assert (error["instancePath"], error["keyword"]) == ("/headline", "minLength")
        assert error["message"] == "must NOT have fewer than 12 characters"
        after = await tool(c, "get_run_state", {"run_id": run})  # Realm's run_version: the
        assert after["run_version"] > first["run_version"]  # refusal was a write on the run
        assert (after["run_phase"], after["next_actions"][0]["instruction"]["tool"]) == (
            "running", "execute_step",
        )  # fmt: skip
        second = await tool(c, "execute_step", short)
        assert second["run_version"] > after["run_version"]  # the number after its writes
        assert (second["status"], second["error_code"]) == ("error", "VALIDATION_EXHAUSTED")
        assert (second["run_phase"], second["agent_action"]) == ("failed", "stop")
        assert second["stopped_step"] == "title"
        assert second["context_hint"] == "Step 'title' failed, and the run has ended."
        assert second["error_details"]["last_ajv_errors"][0]["keyword"] == "minLength"
        assert second["errors"] == ["Step 'title' refused 2 answers, its limit of 2"]
        state = await tool(c, "get_run_state", {"run_id": run})
        assert (state["run_phase"], state["terminal_state"]) == ("failed", True)
        assert state["failed_steps"] == ["title"]
        assert tidied == [1]  # a failed step: the run's `fail` finalizers run (not an abandon)

        run = (await tool(c, "start_run", {"workflow_id": "budget_handled"}))["run_id"]
        for _ in range(2):  # the step fails; `fallback` runs on that failure, the run goes on
            went_on = await tool(c, "execute_step", {**short, "run_id": run})
        assert (went_on["status"], went_on["error_code"]) == ("error", "VALIDATION_EXHAUSTED")
        assert (went_on["run_phase"], went_on["agent_action"]) == ("running", "report_to_user")
        assert went_on["error_details"]["rejections"] == 2
        state = await tool(c, "get_run_state", {"run_id": run})
        assert "fallback" in state["completed_steps"] and state["terminal_state"] is False
        assert (state["failed_steps"], "title" in state["completed_steps"]) == (
            ["title"], False,
        )  # fmt: skip

        run = (await tool(c, "start_run", {"workflow_id": "budget"}))["run_id"]
        ok = {"run_id": run, "command": "title", "params": {"headline": "Quarterly figures are in"}}
        assert (await tool(c, "execute_step", ok))["status"] == "ok"
        bad = {"run_id": run, "command": "guess", "params": {"n": "x"}}
        defaulted = await tool(c, "execute_step", bad)
        assert (defaulted["status"], defaulted["run_phase"]) == ("ok", "completed"), defaulted
        assert defaulted["settled_by_default"] is True
        assert defaulted["defaulted_steps"] == ["guess"]
        assert defaulted["warnings"] == [
            "Step 'guess' took its default_output after 1 refused answers "
            "(validation_exhaustion.mode: default)."
        ]


LACKING = """
id: lacking
name: Lacking
version: 1
steps:
  fetch:
    description: Fetch it
    execution: auto
    handler: fetch_it
  read:
    description: Read it
    execution: agent
    depends_on: [fetch]
"""


async def test_a_missing_handler_leaves_the_run_open_until_advance_run_finds_it(
    mcp_server: ServeFn, client: Client
) -> None:
    """A step whose handler this server lacks "cannot run here (capability)";
    the reply is ok and the run stays open; advance_run runs it once the handler is there."""
    app = App("realm-lacking")
    app.protocol(LACKING)
    unfit = LACKING.replace("id: lacking", "id: unfit").replace(
        "    handler: fetch_it\n",
        "    handler: fetch_it\n    input_map: {m: run.params.m}\n"
        "    input_schema: {type: object, required: [n]}\n",
    )
    app.protocol(unfit)
    async with mcp_server(app) as url:
        c = client(url)
        started = await tool(c, "start_run", {"workflow_id": "lacking"})
        assert (started["status"], started["run_phase"]) == ("ok", "running"), started
        assert started["next_actions"] == []
        assert started["context_hint"].endswith(
            "'fetch' cannot run here (capability): this server has no handler 'fetch_it' — "
            "register the handler here, or let a server that has it run the step."
        )
        assert started["warnings"] == [  # reached: blocked, in place of its pre-flight warning
            "Step 'fetch' is waiting: this server has no handler 'fetch_it'. The run is still "
            "open and the step can still run; a server that has the handler runs it on "
            "advance_run. Register the handler here, or use such a server, then follow "
            "next_actions."
        ]
        run = started["run_id"]
        state = await tool(c, "get_run_state", {"run_id": run})
        assert state["next_actions_status"] == "blocked_on_capability"
        assert state["engine_runnable"] == [  # Realm's run state
            {
                "step": "fetch",
                "runnable_here": False,
                "refused_by": "capability",
                "refusal": "this server has no handler 'fetch_it'",
                "basis": "registry",
            }
        ]
        need = {"requirement": {"kind": "handler", "name": "fetch_it"}}
        code = "ENGINE_HANDLER_NOT_REGISTERED"
        assert state["capability_blocks"] == [{"step": "fetch", **need, "code": code}]
        assert state["run_health"] == [
            {
                "kind": "capability_block",
                "step": "fetch",
                "reason": code,
                "evidence": {**need, "code": code},
            }
        ]
        assert state["warnings"] == ["1 run_health finding(s) on this run; see 'run_health'."]
        still = await tool(c, "advance_run", {"run_id": run})  # still lacking: nothing ran
        assert (still["status"], still["run_phase"]) == ("ok", "running")
        assert "cannot run here (capability)" in still["context_hint"]

        app.handler("fetch_it")(lambda inputs: {"got": 1})
        named = await tool(c, "execute_step", {"run_id": run, "command": "fetch"})  # runs it
        assert (named["command"], named["status"]) == ("fetch", "ok"), named
        assert named["next_actions"][0]["instruction"]["params"]["command"] == "read"
        assert "continued_by" not in named
        idle = await tool(c, "advance_run", {"run_id": run})  # nothing owed: at once, ok
        assert (idle["status"], idle.get("chained_auto_steps")) == ("ok", None)

        refused = await tool(c, "start_run", {"workflow_id": "unfit"})  # its input, refused
        assert (refused["status"], refused["run_phase"]) == ("ok", "running")
        assert refused["context_hint"].endswith(  # then the way out: nothing else can go on
            "'fetch' cannot run (input_schema): the input built for step 'fetch' does not fit its "
            "input_schema: the input must have required property 'n'. The run cannot go on with "
            "its workflow as it is: once the workflow is fixed and registered anew, call "
            "advance_run; otherwise abandon_run ends it."
        )
        state = await tool(c, "get_run_state", {"run_id": refused["run_id"]})
        assert (state["next_actions_status"], state["next_actions"]) == ("ok", [])
        assert [(e["refused_by"], e["refusal"]) for e in state["engine_runnable"]] == [
            (
                "input_schema",
                "the input built for step 'fetch' does not fit its input_schema: the input must "
                "have required property 'n'",
            )
        ]
        assert "run_health" not in state and "capability_blocks" not in state


FLAKY = """
id: flaky
name: Flaky
version: 1
steps:
  fetch:
    description: Fetch, retrying what is worth retrying
    execution: auto
    handler: fetch
    timeout_seconds: 5
    retry: {max_attempts: 3, backoff: fixed, base_delay_ms: 10}
"""


class RateLimited(Exception):
    retryable = True


@pytest.mark.parametrize(("fails", "error"), [(2, RateLimited), (3, RateLimited), (1, ValueError)])
async def test_retry_retries_only_errors_marked_retryable(
    mcp_server: ServeFn, client: Client, fails: int, error: type[Exception]
) -> None:
    """A `retry` block tries again only after an error marked retryable; after
    the last try the step fails with STEP_RETRY_EXHAUSTED; an ordinary error is not retried."""
    calls: list[int] = []
    app = App(f"realm-flaky-{fails}-{error.__name__}")
    app.protocol(FLAKY)

    @app.handler()
    def fetch(inputs: dict[str, Any]) -> dict[str, Any]:
        calls.append(1)
        if len(calls) <= fails:
            raise error("rate limited")
        return {"ok": True}

    async with mcp_server(app) as url:
        c = client(url)
        started = await tool(c, "start_run", {"workflow_id": "flaky"})  # settles at the end
        got = (len(calls), started["run_phase"], started.get("error_code"), started["errors"])
        if error is ValueError:  # not retried
            assert got == (
                1,
                "failed",
                "ENGINE_HANDLER_FAILED",
                ["Handler 'fetch' raised: rate limited"],
            )
        elif fails == 2:
            assert got == (3, "completed", None, [])
        else:
            assert got == (
                3, "failed", "STEP_RETRY_EXHAUSTED",
                ["Step 'fetch' failed on each of its 3 attempts"],
            )  # fmt: skip


async def test_retry_total_timeout_stops_the_retries(mcp_server: ServeFn, client: Client) -> None:
    """With a 600 ms wait and `total_timeout_seconds: 1`, a third try
    could not start within the limit: the step fails after 2 attempts (of 5)."""
    calls: list[int] = []
    app = App("realm-flaky-total")
    app.protocol(
        FLAKY.replace(
            "retry: {max_attempts: 3, backoff: fixed, base_delay_ms: 10}",
            "retry: {max_attempts: 5, base_delay_ms: 600, total_timeout_seconds: 1}",
        )
    )

    @app.handler()
    def fetch(inputs: dict[str, Any]) -> dict[str, Any]:
        calls.append(1)
        raise RateLimited("rate limited")

    async with mcp_server(app) as url:
        started = await tool(client(url), "start_run", {"workflow_id": "flaky"})
        assert (len(calls), started["run_phase"], started.get("error_code")) == (
            2, "failed", "STEP_RETRY_EXHAUSTED",
        )  # fmt: skip
        assert started["errors"] == ["Step 'fetch' failed on each of its 2 attempts"]
