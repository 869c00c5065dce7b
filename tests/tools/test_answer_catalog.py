"""The answer tool in the catalog: one per MCP workflow, mutating, covered by the collision rule,
and its response schema built from the same schemas as the elicitation forms. Our choice
(every wait answerable from plain MCP tools)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pydantic import BaseModel

from tether.runtime.answer_rules import approval_schema, human_task_schema
from tether.runtime.context import Context
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App
from tether.tasks.views import flat_form
from tether.tools.annotations import MUTATING
from tether.tools.catalog import Catalog
from tether.tools.context import ToolContext


class NoArgs(BaseModel):
    pass


def review_app() -> App:
    app = App("answer-catalog")

    @app.workflow(expose=Exposure(tool_set=True))
    async def review(ctx: Context, args: NoArgs) -> str:
        return "ok"

    return app


def test_every_mcp_workflow_gets_a_mutating_answer_tool() -> None:
    """answer_<wf> follows signal_<wf> in the generated set, annotated as a mutation (so the
    roles module lets only operators call it), and needs handle, wait and response."""
    catalog = Catalog.build(review_app())
    names = [t["name"] for t in catalog.listing]
    assert names == [
        "start_review",
        "review_status",
        "review_watch",
        "signal_review",
        "answer_review",
    ]
    tool = catalog.get("answer_review")
    assert tool is not None and tool.kind == "answer" and tool.target == "review"
    assert tool.definition["annotations"] == MUTATING
    assert not catalog.read_only("answer_review")
    assert tool.input_schema["required"] == ["handle", "wait", "response"]
    assert catalog.answer_tool("review") == "answer_review"


def test_the_response_schema_lists_every_answerable_kind_as_the_forms_ask_for_it() -> None:
    """The approval and human-task branches are the elicitation forms' schemas (plus their
    extra fields), so the tool and tasks/update ask for the same answer."""
    tool = Catalog.build(review_app()).get("answer_review")
    assert tool is not None
    response = tool.input_schema["properties"]["response"]
    branches = {b["title"]: b for b in response["anyOf"]}
    assert sorted(branches) == ["agent_step", "approval", "human_task", "remote_input", "signal"]
    approval = {k: v for k, v in branches["approval"].items() if k != "title"}
    assert approval == {**approval_schema(()), "additionalProperties": {"type": "string"}}
    assert flat_form(approval) == flat_form(approval_schema(()))
    human = {k: v for k, v in branches["human_task"].items() if k != "title"}
    assert human == {**human_task_schema({}), "additionalProperties": True}
    for word in ("approve", "reject", "push_back", "complete"):
        assert word in response["description"]


def test_a_set_whose_answer_tool_collides_is_left_out_whole(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The collision rule covers answer_<wf>: a plain tool of that name keeps the whole
    generated set out (never shipped with a tool quietly missing), and no hint names it."""
    app = review_app()

    @app.tool(description="A plain tool that happens to take the name.")
    async def answer_review(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
        return {}

    with caplog.at_level(logging.WARNING, logger="tether.tools.catalog"):
        catalog = Catalog.build(app)
    assert [t["name"] for t in catalog.listing] == ["answer_review"]
    plain = catalog.get("answer_review")
    assert plain is not None and plain.kind == "plain"
    assert catalog.answer_tool("review") is None
    assert "answer_review" in caplog.text
