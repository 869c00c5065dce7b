"""The conformance checklist's fixture tools (tests/conformance/CHECKLIST.md), built as real
Tether tools and workflows, for the black-box MCP tests in tests/e2e/test_mcp_checklist.py.

- `sync_tool`: a plain tool; never creates a task. Reports one progress notification.
- `task_tool`: a workflow served as a tool; a durable sleep of ~0.3 s, or 60 s with
  `{"long": true}`. Creates a task whenever the request declares the Tasks extension.
- `required_task_tool`: the same work, `Exposure(tool=True, task_support="required")` (-32021
  without the extension).
- `input_tool`: waits for one signal per round (form elicitation, a fresh key each time) and
  echoes the answers.
- `multi_input_tool`: waits for two signals at once (`ctx.wait_all`).
- `tool_error_tool`: raises → the task completes with `isError: true`.
- `protocol_error_tool`: raises `tether.ProtocolError` → the task fails with that error.
- `ephemeral_tool`: finishes at once and keeps its row for 1 s (retention), for purge tests.
- `region_tool`: a plain tool whose `region` (string) and `count` (integer) arguments carry
  `x-mcp-header` (SEP-2243 `Mcp-Param-Region`, `Mcp-Param-Count`).
- `mrtr_task_tool`: a plain tool that first asks for confirmation (MRTR), then hands back a task.
- `greeting` prompt and `fixture://hello` resource, so prompts/get and resources/read are served.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field, field_validator

from tether import ProtocolError, Signal
from tether.runtime.context import Context
from tether.runtime.exposure import Exposure
from tether.runtime.registry import App
from tether.tools.context import ToolContext

app = App("mcp-fixtures")

RETENTION = timedelta(hours=1)
SHORT_S = 0.3
LONG_S = 60.0
PROTOCOL_ERROR_CODE = 4001  # application codes live outside -32768..-32000


# --- plain tools -------------------------------------------------------------------------------


class EchoArgs(BaseModel):
    text: str = "hello"

    @field_validator("text")
    @classmethod
    def not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("text must not be blank")
        return value


@app.tool(description="Echo the text back at once (never a task).")
async def sync_tool(ctx: ToolContext, args: EchoArgs) -> dict[str, Any]:
    await ctx.progress(1, 1, "echoed")
    return {"echo": args.text}


class RegionArgs(BaseModel):
    region: str | None = None
    count: int | None = None


REGION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
    },
}


@app.tool(description="Echo the routed arguments.", input_schema=REGION_SCHEMA)
async def region_tool(ctx: ToolContext, args: RegionArgs) -> dict[str, Any]:
    return {"region": args.region, "count": args.count}


class ConfirmArgs(BaseModel):
    long: bool = False


@app.tool(description="Ask for confirmation (MRTR), then start task_tool as a task.")
async def mrtr_task_tool(ctx: ToolContext, args: ConfirmArgs) -> dict[str, Any]:
    answer = ctx.input_responses.get("confirm")
    if not isinstance(answer, dict) or answer.get("action") != "accept":
        ctx.ask(
            {
                "confirm": {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": "Start the job?",
                        "requestedSchema": {
                            "type": "object",
                            "properties": {"ok": {"type": "boolean"}},
                            "required": ["ok"],
                        },
                    },
                }
            },
            state={"asked": True},
        )
    return await ctx.start_task("task_tool", {"long": args.long})


# --- workflows served as tools ----------------------------------------------------------------


class TaskInput(BaseModel):
    long: bool = False


class TaskOutput(BaseModel):
    slept: float


@app.workflow(expose=Exposure(tool=True), retention=RETENTION)
async def task_tool(ctx: Context, job: TaskInput) -> TaskOutput:
    """Sleep durably for a moment (60 s with long=true), then report it."""
    pause = LONG_S if job.long else SHORT_S
    await ctx.set_details(f"sleeping {pause:g}s")
    await ctx.sleep(pause)
    return TaskOutput(slept=pause)


@app.workflow(expose=Exposure(tool=True, task_support="required"), retention=RETENTION)
async def required_task_tool(ctx: Context, job: TaskInput) -> TaskOutput:
    """The same work as task_tool, served only as a task."""
    pause = LONG_S if job.long else SHORT_S
    await ctx.sleep(pause)
    return TaskOutput(slept=pause)


class Answer(BaseModel):
    text: str = Field(description="Your answer")


class InputJob(BaseModel):
    rounds: int = Field(1, ge=1, le=5)


class InputOutput(BaseModel):
    answers: list[str]


@app.workflow(expose=Exposure(tool=True), retention=RETENTION)
async def input_tool(ctx: Context, job: InputJob) -> InputOutput:
    """Ask `rounds` questions, one at a time, and echo the answers."""
    answers = []
    for i in range(job.rounds):
        got = await ctx.wait_for_signal(f"answer-{i + 1}", schema=Answer, prompt="Say something")
        answers.append(got.text)
    return InputOutput(answers=answers)


class First(BaseModel):
    first: str


class Second(BaseModel):
    second: str


@app.workflow(expose=Exposure(tool=True), retention=RETENTION)
async def multi_input_tool(ctx: Context) -> dict[str, str]:
    """Ask two questions at once."""
    a, b = await ctx.wait_all(
        Signal("first", "First answer", First), Signal("second", "Second answer", Second)
    )
    return {"first": a.first, "second": b.second}


@app.workflow(expose=Exposure(tool=True), retention=RETENTION)
async def tool_error_tool(ctx: Context) -> str:
    """Fail with a business error (a tool error, not a protocol error)."""
    raise RuntimeError("the widget is broken")


@app.workflow(expose=Exposure(tool=True), retention=RETENTION)
async def protocol_error_tool(ctx: Context) -> str:
    """End with a JSON-RPC error."""
    raise ProtocolError(PROTOCOL_ERROR_CODE, "upstream rejected the job", {"upstream": "x"})


@app.workflow(expose=Exposure(tool=True), retention=timedelta(seconds=1))
async def ephemeral_tool(ctx: Context) -> str:
    """Finish at once; the run is deleted one second after it ends."""
    return "gone soon"


# --- prompts and resources ------------------------------------------------------------------


@app.prompt("greeting", description="Greet someone", arguments=[{"name": "who"}])
async def greeting(ctx: Any, arguments: dict[str, str]) -> dict[str, Any]:
    who = arguments.get("who", "world")
    return {"messages": [{"role": "user", "content": {"type": "text", "text": f"Hi {who}"}}]}


@app.resource("fixture://hello", name="hello", mime_type="text/plain")
async def hello(ctx: Any, uri: str) -> list[dict[str, Any]]:
    return [{"uri": uri, "mimeType": "text/plain", "text": "hello"}]
