"""Fixtures of the official MCP conformance suite (`@modelcontextprotocol/conformance`), each a
real Tether workflow or tool: `tether serve tether.testing.conformance:app --port PORT`.

Names and payloads are the ones the suite's scenarios call and expect (scripts/official-conformance
runs them against this app). This module holds the tools and workflows; `conformance_prompts`
the prompts and resources (registered last), `conformance_content` what they say and ask.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field

from tether.jsonrpc.errors import MissingRequiredClientCapability, tasks_capability_required
from tether.runtime.context import Context
from tether.runtime.errors import ProtocolError
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App
from tether.runtime.waits import Signal
from tether.testing import conformance_prompts
from tether.testing.conformance_content import (
    CONFIRM,
    EMBEDDED,
    JSON_SCHEMA_2020_12,
    NAME_FORM,
    PNG,
    ROOTS,
    WAV,
    accepted,
    elicit,
    sample,
    sample_text,
    text,
)
from tether.tools.context import ToolContext, ToolError

app = App("conformance")

RETENTION = timedelta(hours=1)


# --- plain tools (synchronous) -------------------------------------------------------------------


class GreetArgs(BaseModel):
    name: str = "world"


@app.tool(description="Say hello (always synchronous).")
async def greet(ctx: ToolContext, args: GreetArgs) -> dict[str, Any]:
    return text(f"Hello, {args.name}!")


class NoArgs(BaseModel):
    pass


@app.tool(description="Returns simple text content.")
async def test_simple_text(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    return text("This is a simple text response for testing.")


@app.tool(description="Returns image content.")
async def test_image_content(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    return {"content": [{"type": "image", "data": PNG, "mimeType": "image/png"}]}


@app.tool(description="Returns audio content.")
async def test_audio_content(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    return {"content": [{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]}


@app.tool(description="Returns an embedded resource.")
async def test_embedded_resource(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    return {"content": [EMBEDDED]}


@app.tool(description="Returns text, image and resource content.")
async def test_multiple_content_types(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    return {
        "content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            EMBEDDED,
        ]
    }


@app.tool(description="Always fails with a tool error.")
async def test_error_handling(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    raise ToolError("This tool intentionally returns an error for testing")


@app.tool(description="Reports progress three times.")
async def test_tool_with_progress(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    for step in (0, 50, 100):
        await ctx.progress(step, 100, f"step {step}")
    return text("Progress test completed")


@app.tool(description="Logs three messages (only when the request sets a log level).")
async def test_logging_tool(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.log("info", message, "conformance")
    return text("Logging test completed")


@app.tool(description="Needs sampling: without it the call is refused with -32021.")
async def test_missing_capability(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    if "sampling" not in ctx.capabilities:
        raise MissingRequiredClientCapability(
            "this tool needs the sampling capability", required={"sampling": {}}
        )
    return text("sampling is declared")


@app.tool(description="Streams nothing but its final answer: asks for input with MRTR.")
async def test_streaming_elicitation(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    content = accepted(ctx, "user_name")
    if content is None:
        ctx.ask({"user_name": NAME_FORM})
    return text(f"Hello, {content.get('name')}!")


@app.tool(description="MRTR: one elicitation, then a greeting.")
async def test_input_required_result_elicitation(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    content = accepted(ctx, "user_name")
    if content is None or not isinstance(content.get("name"), str):
        ctx.ask({"user_name": NAME_FORM})
    return text(f"Hello, {content['name']}!")


@app.tool(description="MRTR: one sampling request.")
async def test_input_required_result_sampling(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    answer = ctx.input_responses.get("capital_question")
    if not isinstance(answer, dict):
        ctx.ask({"capital_question": sample("What is the capital of France?", 100)})
    return text(f"The model said: {sample_text(answer)}")


@app.tool(description="MRTR: one roots/list request.")
async def test_input_required_result_list_roots(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    answer = ctx.input_responses.get("client_roots")
    if not isinstance(answer, dict) or not isinstance(answer.get("roots"), list):
        ctx.ask({"client_roots": ROOTS})
    uris = [r.get("uri") for r in answer["roots"] if isinstance(r, dict)]
    return text(f"Client roots: {', '.join(str(u) for u in uris)}")


@app.tool(description="MRTR with requestState round-tripped.")
async def test_input_required_result_request_state(
    ctx: ToolContext, args: NoArgs
) -> dict[str, Any]:
    content = accepted(ctx, "confirm")
    if content is None or ctx.request_state != {"round": 1}:
        ctx.ask({"confirm": CONFIRM}, state={"round": 1})
    return text(f"state-ok: confirmed={content.get('ok')}")


@app.tool(description="MRTR: elicitation, sampling and roots at once.")
async def test_input_required_result_multiple_inputs(
    ctx: ToolContext, args: NoArgs
) -> dict[str, Any]:
    keys = ("user_name", "greeting", "client_roots")
    if ctx.request_state != {"multi": True} or any(k not in ctx.input_responses for k in keys):
        ctx.ask(
            {
                "user_name": NAME_FORM,
                "greeting": sample("Generate a greeting", 50),
                "client_roots": ROOTS,
            },
            state={"multi": True},
        )
    name = (accepted(ctx, "user_name") or {}).get("name")
    return text(
        f"All inputs received: name={name}, greeting={sample_text(ctx.input_responses['greeting'])}"
    )


@app.tool(description="MRTR over three rounds with evolving requestState.")
async def test_input_required_result_multi_round(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    state = ctx.request_state if isinstance(ctx.request_state, dict) else {}
    if state.get("round") == 2 and (color := accepted(ctx, "step2")) is not None:
        return text(f"Hello {state.get('name')}, your favorite color is {color.get('color')}")
    if state.get("round") == 1 and (step1 := accepted(ctx, "step1")) is not None:
        ctx.ask(
            {
                "step2": elicit(
                    "Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"]
                )
            },
            state={"round": 2, "name": step1.get("name")},
        )
    return ctx.ask(
        {"step1": elicit("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])},
        state={"round": 1},
    )


@app.tool(description="MRTR whose requestState is integrity-protected.")
async def test_input_required_result_tampered_state(
    ctx: ToolContext, args: NoArgs
) -> dict[str, Any]:
    content = accepted(ctx, "confirm")
    if content is None or ctx.request_state != {"issued": True}:
        ctx.ask({"confirm": CONFIRM}, state={"issued": True})
    return text("state verified")


@app.tool(description="MRTR asking only for what the client declared.")
async def test_input_required_result_capabilities(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    caps = ctx.capabilities
    wanted: dict[str, Any] = {}
    if "elicitation" in caps:
        wanted["user_name"] = NAME_FORM
    if "sampling" in caps:
        wanted["greeting"] = sample("Generate a greeting", 50)
    if "roots" in caps:
        wanted["client_roots"] = ROOTS
    if wanted and not all(k in ctx.input_responses for k in wanted):
        ctx.ask(wanted)
    return text(f"Answered: {sorted(wanted)}")


class SchemaArgs(BaseModel):
    model_config = {"extra": "allow"}


@app.tool(
    description="Tool with a JSON Schema 2020-12 input schema.", input_schema=JSON_SCHEMA_2020_12
)
async def json_schema_2020_12_tool(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return text("ok")


@app.tool(
    description="Echoes a region routed by the Mcp-Param-Region header.",
    input_schema={
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
            "message": {"type": "string"},
        },
    },
)
async def test_headers(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return text(f"region={args.get('region')}")


# --- workflows -----------------------------------------------------------------------------------


class ComputeArgs(BaseModel):
    seconds: float = Field(1.0, ge=0, le=3600)
    label: str = "job"


@app.workflow(expose=Exposure(tool=True), retention=RETENTION)
async def slow_compute(ctx: Context, args: ComputeArgs) -> dict[str, Any]:
    """Sleep durably for `seconds`, then report (a task with the Tasks extension)."""
    await ctx.set_details(f"{args.label}: computing for {args.seconds:g}s")
    if args.seconds > 0:
        await ctx.sleep(args.seconds)
    return {
        "label": args.label,
        "seconds": args.seconds,
        "result": f"{args.label} finished after {args.seconds:g}s",
    }


class JobArgs(BaseModel):
    reason: str = "the job failed on purpose"


@app.workflow(expose=Exposure(tool=True, task_support="required"), retention=RETENTION)
async def failing_job(ctx: Context, args: JobArgs) -> None:
    """A task that always ends as a tool error (completed, isError)."""
    raise RuntimeError(args.reason)


@app.workflow(expose=Exposure(tool=True, task_support="required"), retention=RETENTION)
async def protocol_error_job(ctx: Context, args: JobArgs) -> None:
    """A task that ends failed with a JSON-RPC error."""
    raise ProtocolError(-32603, f"Internal error: {args.reason}")


class DeleteArgs(BaseModel):
    filename: str = "important.txt"


class Confirm(BaseModel):
    confirm: bool


@app.workflow(expose=Exposure(tool=True), retention=RETENTION)
async def confirm_delete(ctx: Context, args: DeleteArgs) -> str:
    """Ask for confirmation (one input request), then delete — or not."""
    answer = await ctx.wait_for_signal("confirm", schema=Confirm, prompt=f"Delete {args.filename}?")
    return f"Deleted {args.filename}" if answer.confirm else f"Kept {args.filename}"


class Choice(BaseModel):
    name: str


@app.workflow(expose=Exposure(tool=True), retention=RETENTION)
async def multi_input(ctx: Context, args: NoArgs) -> str:
    """Two input requests at once; answering one leaves the other pending."""
    first, second = await ctx.wait_all(
        Signal("first", "First value?", Choice), Signal("second", "Second value?", Choice)
    )
    return f"first={first.name}, second={second.name}"


class NameArgs(BaseModel):
    name: str


@app.workflow(expose=Exposure(tasks=True), retention=RETENTION)
async def greet_later(ctx: Context, args: NameArgs) -> str:
    """The task behind test_tool_with_task."""
    return f"Hello, {args.name}! (from a task)"


@app.tool(description="MRTR round for the name, then a task (Tasks extension required).")
async def test_tool_with_task(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    if not ctx.declares_tasks:
        raise tasks_capability_required("test_tool_with_task runs only as a task")
    content = accepted(ctx, "user_name")
    if content is None or not isinstance(content.get("name"), str):
        ctx.ask({"user_name": NAME_FORM})
    return await ctx.start_task("greet_later", {"name": content["name"]})


conformance_prompts.register(app)
