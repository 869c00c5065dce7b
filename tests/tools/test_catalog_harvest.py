"""The generated tool set against Harvest's MCP tool contract (docs/clients.md, "Coming from
Harvest's MCP tools"): opt-in, the generated names, the collision rule, the embedded input
schema and the annotations. Pure: the catalog is built from the App, no server."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pydantic import BaseModel

from tether.runtime.context import Context
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App
from tether.tools.catalog import Catalog


class Review(BaseModel):
    title: str


class Deadline(BaseModel):
    days: int


def names(catalog: Catalog) -> list[str]:
    return [t["name"] for t in catalog.listing]


def colliding_app(first: str, second: str) -> App:
    """Two MCP workflows whose generated names clash (Harvest's example: invoice_status's
    start tool and start_invoice's status tool are both start_invoice_status)."""
    app = App("collisions")

    async def run(ctx: Context, req: Review) -> str:
        return req.title

    for name in (first, second):
        app.workflow(name=name, expose=Exposure(tool_set=True))(run)
    return app


@pytest.mark.parametrize(
    ("first", "second"), [("invoice_status", "start_invoice"), ("start_invoice", "invoice_status")]
)
def test_of_two_colliding_workflows_the_later_one_is_left_out_whole(
    first: str, second: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Harvest's rule: the workflow that loses the tiebreak (registration order) is excluded
    from MCP exposure entirely, with a warning, never shipped with one tool quietly missing;
    the winner keeps its whole set."""
    with caplog.at_level(logging.WARNING, logger="tether.tools.catalog"):
        catalog = Catalog.build(colliding_app(first, second))
    listed = names(catalog)
    assert "start_invoice_status" in listed
    assert not [n for n in listed if second in n.replace(first, "")], listed
    assert {f"start_{first}", f"{first}_status", f"{first}_watch", f"signal_{first}"} <= set(listed)
    assert f"workflow {second}" in caplog.text
    assert not catalog.in_catalog(second) and catalog.in_catalog(first)


def test_the_generated_set_its_schemas_and_annotations() -> None:
    """Harvest's set: start_foo, foo_status, foo_watch, signal_foo and foo_update_bar for an mcp
    update only; start_foo's inputSchema embeds the published schema as a self-contained
    $defs component under a required `body`; the status (and watch) tools are read-only, the
    mutating tools are not."""
    app = App("generated")

    @app.workflow(expose=Exposure(tool_set=True))
    async def foo(ctx: Context, req: Review) -> str:
        return req.title

    @app.update("foo", mcp=True)
    async def bar(ctx: Context, d: Deadline) -> int:
        return d.days

    @app.update("foo")
    async def hidden(ctx: Context, d: Deadline) -> int:
        return d.days

    catalog = Catalog.build(app)
    listed = names(catalog)
    assert listed == [
        "start_foo",
        "foo_status",
        "foo_watch",
        "signal_foo",
        "answer_foo",
        "foo_update_bar",
    ]
    schema: dict[str, Any] = catalog.listing[0]["inputSchema"]
    ref = schema["properties"]["body"]["$ref"]
    assert ref.startswith("#/$defs/") and schema["required"] == ["body"]
    component = schema["$defs"][ref.removeprefix("#/$defs/")]
    assert component["properties"]["title"]["type"] == "string"
    assert component["required"] == ["title"]
    hints = {t["name"]: t["annotations"]["readOnlyHint"] for t in catalog.listing}
    assert hints == {
        "start_foo": False,
        "foo_status": True,
        "foo_watch": True,
        "signal_foo": False,
        "answer_foo": False,
        "foo_update_bar": False,
    }
