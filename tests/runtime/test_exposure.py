"""How a workflow is served over MCP: one `Exposure` value, each way of serving it spelled one
way, read by the tool catalog. Our choice."""

from __future__ import annotations

from typing import Any

import pytest

from tether import Exposure
from tether.runtime.context import Context
from tether.runtime.registry import App
from tether.tools.catalog import Catalog


async def run(ctx: Context) -> None:
    return None


def names(app: App) -> list[str]:
    return sorted(t["name"] for t in Catalog.build(app).listing)


@pytest.mark.parametrize(
    ("old", "said"),
    [
        ({"mcp": True}, "expose=tether.Exposure(tool_set=True)"),
        ({"tool": "go", "task_support": "required"}, "Exposure(tool='go', task_support="),
        ({"tasks": True}, "expose=tether.Exposure(tasks=True)"),
    ],
)
def test_the_replaced_keywords_are_refused_naming_the_exposure_that_says_it(
    old: dict[str, Any], said: str
) -> None:
    """`mcp`, `tool`, `task_support` and `tasks` are refused with a TypeError that spells the
    same exposure with `expose=`, and nothing is registered."""
    app = App()
    with pytest.raises(TypeError) as refused:
        app.workflow(name="wf", **old)(run)
    assert said in str(refused.value)
    assert "wf" not in app.workflows
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        app.workflow(name="wf", colour="red")(run)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "options",
    [
        {"task_support": "required"},
        {"tool_set": True, "tasks": True},
        {"tool": True, "tasks": True},
        {"tool": ""},
    ],
    ids=["required-without-tool", "tasks-with-tool-set", "tasks-with-tool", "empty-name"],
)
def test_an_exposure_that_overlaps_or_means_nothing_is_refused(options: dict[str, Any]) -> None:
    """`task_support` without `tool`, `tasks` beside a tool that serves tasks already, and an
    empty tool name are ValueErrors: each exposure has one spelling."""
    with pytest.raises(ValueError, match="Exposure"):
        Exposure(**options)


def test_each_exposure_serves_its_tools_and_tasks() -> None:
    """The tool set, the one tool (named after the workflow or given a name), both at once,
    and tasks alone, as the catalog serves them; no exposure serves nothing."""
    app = App()
    app.workflow(name="hidden")(run)
    app.workflow(name="listed", expose=Exposure(tool_set=True))(run)
    app.workflow(name="single", expose=Exposure(tool=True))(run)
    app.workflow(name="both", expose=Exposure(tool_set=True, tool="both_now"))(run)
    app.workflow(name="quiet", expose=Exposure(tasks=True))(run)
    listed = names(app)
    assert {"start_listed", "listed_status", "single", "start_both", "both_now"} <= set(listed)
    assert not [n for n in listed if "hidden" in n or "quiet" in n]
    catalog = Catalog.build(app)
    served = {w: catalog.in_catalog(w) for w in ("hidden", "listed", "single", "both", "quiet")}
    assert served == {"hidden": False, "listed": True, "single": True, "both": True, "quiet": True}
    assert [Exposure(tool=True).tool_name("wf"), Exposure(tool="x").tool_name("wf")] == ["wf", "x"]
    assert Exposure().tool_name("wf") is None
