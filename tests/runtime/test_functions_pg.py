"""DAG steps (`run: NAME`) and protocol auto steps (`handler: NAME`) call functions from the
App's one registry, each in its file format's convention, on a real PostgreSQL. Our choice."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tether.runtime.functions import FunctionNotRegistered, Functions
from tether.runtime.realm import interpreter
from tether.runtime.realm.plan import plan_from_text
from tether.runtime.registry import App

from .conftest import Start

pytestmark = pytest.mark.postgres

DAG = """
name: tally
steps:
  - name: add
    run: add
    with: {a: 2, b: 3}
    output: SUM
"""

PROTOCOL = """
id: tally_protocol
name: Tally
version: 1
steps:
  count:
    description: Count the params
    execution: auto
    handler: count
"""

MISSING = """
name: missing
steps:
  - name: call
    run: fetch
    with: {url: "http://example.invalid"}
"""


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def test_a_dag_step_and_a_protocol_step_call_functions_of_one_registry(
    start: Start,
) -> None:
    """Both formats find their functions in the App's one registry: a DAG step passes its
    `with:` values as keywords, a protocol step one `{"params", "steps", "config"}` dict; a
    sync function runs off the event loop in both."""
    app = App()
    seen: dict[str, Any] = {}

    @app.function()
    def add(a: int, b: int) -> int:
        seen["add"] = _on_loop()
        return a + b

    @app.function()
    def count(inputs: dict[str, Any]) -> dict[str, Any]:
        seen["count"] = _on_loop()
        return {"keys": sorted(inputs), "n": len(inputs["params"])}

    app.dag(DAG)
    app.protocol(PROTOCOL)
    async with start(app) as rt:
        dag_run = await rt.ops.start("tally", {})
        protocol_run = await rt.ops.start("tally_protocol", {"params": {"x": 1, "y": 2}})
        dag_end = await rt.ops.wait_for_end(dag_run.execution.id, timeout=20)
        protocol_end = await rt.ops.wait_for_end(protocol_run.execution.id, timeout=20)
    assert dag_end.current.status == "completed", dag_end.current.error
    assert dag_end.current.output["outputs"] == {"SUM": "5"}
    assert protocol_end.current.status == "completed", protocol_end.current.error
    assert protocol_end.current.output["outputs"]["count"] == {
        "keys": ["config", "params", "steps"],
        "n": 2,
    }
    assert seen == {"add": False, "count": False}


async def test_a_dag_step_naming_no_function_fails_naming_the_registered_ones(
    start: Start,
) -> None:
    """A `run:` with arguments that names no registered function fails its step, and the
    error names the functions that are registered (FunctionNotRegistered's text)."""
    app = App()
    app.function("fetch_page")(lambda url: url)
    app.dag(MISSING)
    async with start(app) as rt:
        started = await rt.ops.start("missing", {})
        view = await rt.ops.wait_for_end(started.execution.id, timeout=20)
        steps = await rt.ops.steps(started.execution.id)
    assert view.current.status == "failed"
    (result,) = [s.result["value"] for s in steps if s.name == "node:call"]
    assert result["status"] == "failed"
    assert str(FunctionNotRegistered("fetch", ["fetch_page"])) in result["error"]


async def test_a_protocol_step_whose_function_is_gone_raises_the_one_error() -> None:
    """An auto step that reaches its call without its function raises FunctionNotRegistered,
    the error a DAG step's lookup raises too."""
    step = plan_from_text(PROTOCOL).step("count")
    assert step is not None
    functions = Functions()
    functions.register(lambda inputs: inputs, "other")
    with pytest.raises(FunctionNotRegistered) as missing:
        await interpreter._run_handler(functions, step, {}, {})
    assert (missing.value.name, missing.value.registered) == ("count", ("other",))
