"""Caller-supplied documents over real HTTP: an inline DAG spec or a `create_workflow` plan
over a limit is refused in the surface's own terms, naming the setting and its value, with
nothing created; reading one never holds the event loop, so other calls are served while it
is read; and the process that reads documents may die without taking the server along."""

from __future__ import annotations

import asyncio
import io
import multiprocessing
import pickle
from collections.abc import Callable, Iterator
from multiprocessing.managers import SyncManager
from typing import Any

import orjson
import pytest

from tests.e2e.conftest import ServeFn
from tests.e2e.test_answer_tool import PLAIN
from tests.e2e.test_dagu_execute import execute, ok, refused
from tests.e2e.test_fuzz_endpoint import snapshot
from tests.e2e.test_realm_create_batch_trace import PLAN
from tests.e2e.test_realm_tools import build_app, tool
from tests.mcp_client import McpClient, meta
from tests.tools.worker_calls import Held, exit_worker
from tether.runtime.registry import App
from tether.specs.dag import load_string
from tether.specs.limits import (
    MAX_ALIASES_SETTING,
    MAX_BYTES_SETTING,
    MAX_DEPTH_SETTING,
    MAX_STEPS_SETTING,
)
from tether.tools import offload
from tether.tools.dagu import actions
from tether.tools.realm import agent_plans

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]
Client = Callable[[str], McpClient]

LIMITS = {
    "spec_max_bytes": 4096,
    "spec_max_steps": 5,
    "spec_max_depth": 8,
    "spec_max_aliases": 3,
}
HEAD = "steps:\n  - name: s\n    run: act\n"


def dag_app() -> App:
    app = App()

    @app.action("act")
    async def act() -> str:
        return "done"

    app.dag("name: stored\n" + HEAD)  # the Dagu tools are served beside stored DAGs
    return app


def many_steps(n: int) -> str:
    return "steps:\n" + "".join(f"  - name: s{i}\n    run: act\n" for i in range(n))


def laughs() -> str:
    lines = [HEAD.rstrip("\n"), "env:", "  - L0: &l0 lol"]
    lines += [f"  - L{i}: &l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, 5)]
    return "\n".join(lines) + "\n"


OVER = [
    (HEAD + "description: " + "x" * 5000 + "\n", MAX_BYTES_SETTING, 4096),
    (many_steps(6), MAX_STEPS_SETTING, 5),
    (HEAD + "env:\n  - A: " + "[" * 10 + "]" * 10 + "\n", MAX_DEPTH_SETTING, 8),
    (laughs(), MAX_ALIASES_SETTING, 3),
]


async def test_an_inline_spec_over_a_limit_is_refused_naming_it_and_changes_nothing(
    mcp_server: ServeFn, client: Client, db_url: str
) -> None:
    """Our choice: invalid_tool_input on `spec`, the message and `details` naming the setting
    and its value; no DAG is registered and no run is created."""
    app = dag_app()
    async with mcp_server(app, **LIMITS) as url:
        c = client(url)
        before = await snapshot(db_url)
        for spec, setting, maximum in OVER:
            err = refused(
                await execute(c, action="start", name="inline1", spec=spec),
                "invalid_tool_input",
                "spec",
            )
            assert err["details"] == {"limit": setting, "maximum": maximum}, err
            assert f"{setting}={maximum}" in err["message"]
        assert "inline1" not in app.dags
        assert await snapshot(db_url) == before
        out = ok(await execute(c, action="start", name="inline1", spec=many_steps(5), wait=True))
        assert out["statusLabel"] == "succeeded"


async def test_params_nested_past_the_depth_limit_are_invalid_tool_input(
    mcp_server: ServeFn, client: Client, db_url: str
) -> None:
    """Our choice: an object argument deeper than TETHER_SPEC_MAX_DEPTH is refused on its
    field before anything walks it."""
    deep: Any = "x"
    for _ in range(100):
        deep = {"a": deep}
    app = dag_app()
    async with mcp_server(app) as url:
        c = client(url)
        before = await snapshot(db_url)
        err = refused(
            await execute(c, action="start", name="inline1", spec=HEAD, params=deep),
            "invalid_tool_input",
            "params",
        )
        assert f"{MAX_DEPTH_SETTING}=32" in err["message"]
        assert await snapshot(db_url) == before


async def test_a_plan_over_a_limit_is_refused_in_realm_terms(
    mcp_server: ServeFn, client: Client, db_url: str
) -> None:
    """Our choice: a refusal with `provide_input` and no error code (as a malformed plan
    gets), naming the setting and its value; nothing is registered or started."""
    app = build_app()
    steps = [{"id": f"s{i}", "description": "do it"} for i in range(6)]
    async with mcp_server(app, **LIMITS) as url:
        c = client(url)
        before = await snapshot(db_url)
        reply = await tool(c, "create_workflow", {"steps": steps})
        assert (reply["status"], reply["agent_action"]) == ("error", "provide_input")
        assert reply.get("error_code") is None
        assert f"{MAX_STEPS_SETTING}=5" in reply["errors"][0]
        assert list(app.protocols) == ["expense"]
        assert await snapshot(db_url) == before


async def test_a_plan_nested_deeper_than_python_can_hand_over_is_refused_for_its_depth(
    mcp_server: ServeFn, client: Client, db_url: str
) -> None:
    """Our choice: a plan nested 400 levels deep (more than pickling it for the document
    worker can follow) gets the depth limit's refusal, not an internal error."""
    app = build_app()
    nested = '{"more":[' * 400 + "{}" + "]}" * 400
    step = '{"id":"s0","description":"do it","notes":' + nested + "}"
    params = {"name": "create_workflow", "arguments": "PLAN", "_meta": meta(PLAIN)}
    body = orjson.dumps(params).replace(b'"PLAN"', b'{"steps":[' + step.encode() + b"]}")
    request = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":' + body + b"}"
    async with mcp_server(app) as url:
        c = client(url)
        before = await snapshot(db_url)
        response = await c.post(request, c.headers("tools/call", params))
        assert "result" in response.json(), response.text[:500]
        result = response.json()["result"]
        reply = orjson.loads(result["content"][0]["text"])
        assert (reply["status"], reply["agent_action"]) == ("error", "provide_input")
        assert f"{MAX_DEPTH_SETTING}=32" in reply["errors"][0]
        assert list(app.protocols) == ["expense"]
        assert await snapshot(db_url) == before


@pytest.fixture
def manager() -> Iterator[SyncManager]:
    """Events the test process and the document worker share."""
    with multiprocessing.get_context("spawn").Manager() as shared:
        yield shared


async def served_while_held(held: Held, call: Any, c: McpClient) -> Any:
    """Start `call`, wait until the loader holds, then make another call; release the
    loader once that other call was answered. On the event loop, the loader would hold the
    loop, the other call could not be answered until it gave up, and it would find itself
    released too late."""
    pending = asyncio.ensure_future(call)
    assert await asyncio.to_thread(held.started.wait, 5)
    await c.result("tools/list", capabilities={})
    held.release.set()
    return await pending


async def test_an_inline_spec_is_read_off_the_event_loop(
    mcp_server: ServeFn, client: Client, monkeypatch: pytest.MonkeyPatch, manager: SyncManager
) -> None:
    """Our choice: other calls are served while an inline spec is parsed and validated."""
    held = Held(manager, load_string)
    monkeypatch.setattr(actions, "load_string", held)
    async with mcp_server(dag_app()) as url:
        c = client(url)
        call = execute(client(url), action="start", name="inline1", spec=HEAD, wait=True)
        out = ok(await served_while_held(held, call, c))
    assert out["statusLabel"] == "succeeded"
    assert held.released_in_time.is_set()


async def test_a_plan_is_read_off_the_event_loop(
    mcp_server: ServeFn, client: Client, monkeypatch: pytest.MonkeyPatch, manager: SyncManager
) -> None:
    """Our choice: other calls are served while a `create_workflow` plan is checked."""
    held = Held(manager, agent_plans.read_plan)
    monkeypatch.setattr(agent_plans, "read_plan", held)
    async with mcp_server(build_app()) as url:
        c = client(url)
        reply = await served_while_held(held, tool(client(url), "create_workflow", PLAN), c)
    assert reply["status"] == "ok", reply
    assert held.released_in_time.is_set()


async def test_a_spec_whose_reader_dies_is_refused_and_the_next_spec_is_read(
    mcp_server: ServeFn, client: Client, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our choice: the process reading documents ending mid-spec (a crash, an out-of-memory
    kill) costs that call an internal_error on `spec` and changes nothing; the server stays
    up and a new process reads the next spec."""
    app = dag_app()
    async with mcp_server(app) as url:
        c = client(url)
        before = await snapshot(db_url)
        monkeypatch.setattr(actions, "load_string", exit_worker)
        refused(
            await execute(c, action="start", name="inline1", spec=HEAD), "internal_error", "spec"
        )
        assert "inline1" not in app.dags
        assert await snapshot(db_url) == before
        monkeypatch.setattr(actions, "load_string", load_string)
        out = ok(await execute(c, action="start", name="inline1", spec=HEAD, wait=True))
    assert out["statusLabel"] == "succeeded"


async def test_a_plan_whose_reader_dies_is_refused_and_the_next_plan_is_read(
    mcp_server: ServeFn, client: Client, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our choice: as for a spec, in Realm's terms: ENGINE_INTERNAL (agent action `stop`),
    nothing registered or started; the next plan is read by a new process."""
    app = build_app()
    read_plan = agent_plans.read_plan
    async with mcp_server(app) as url:
        c = client(url)
        before = await snapshot(db_url)
        monkeypatch.setattr(agent_plans, "read_plan", exit_worker)
        reply = await tool(c, "create_workflow", PLAN)
        assert (reply["status"], reply["error_code"]) == ("error", "ENGINE_INTERNAL"), reply
        assert reply["agent_action"] == "stop"
        assert list(app.protocols) == ["expense"]
        assert await snapshot(db_url) == before
        monkeypatch.setattr(agent_plans, "read_plan", read_plan)
        reply = await tool(c, "create_workflow", PLAN)
    assert reply["status"] == "ok", reply


def parts_ahead(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many parts crossed ahead of each result the document worker sent back, in turn."""
    ahead: list[int] = []
    loads = offload._loads

    async def counted(packed: bytes) -> Any:
        ahead.append(pickle.Unpickler(io.BytesIO(packed)).load())  # noqa: S301 — the worker's
        return await loads(packed)

    monkeypatch.setattr(offload, "_loads", counted)
    return ahead


async def test_a_plan_crosses_from_the_worker_a_step_at_a_time(
    mcp_server: ServeFn, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our choice: the loaded plan's steps are unpickled one by one ahead of it (after its
    arguments were checked, which returns its text whole), so the event loop runs other work
    between slices of a large plan."""
    ahead = parts_ahead(monkeypatch)
    async with mcp_server(build_app()) as url:
        reply = await tool(client(url), "create_workflow", PLAN)
    assert reply["status"] == "ok", reply
    assert ahead == [0, len(PLAN["steps"])]


async def test_the_inline_spec_a_new_one_replaces_is_let_go_a_slice_at_a_time(
    mcp_server: ServeFn, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our choice: its steps, which may hold the last references to it, are dropped by
    `offload.drop_in_pieces` between other work on the event loop."""
    dropped: list[list[str]] = []
    drop = offload.drop_in_pieces

    async def noted(parts: list[Any]) -> None:
        dropped.append([step.name for step in parts])
        await drop(parts)

    monkeypatch.setattr(offload, "drop_in_pieces", noted)
    async with mcp_server(dag_app()) as url:
        c = client(url)
        ok(await execute(c, action="start", name="inline1", spec=HEAD))
        ok(await execute(c, action="start", name="inline1", spec=many_steps(2)))
    assert dropped == [[], ["s"]]
