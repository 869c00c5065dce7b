"""The state a run shares across scenarios: the client, the fixtures, the verdicts, and the
task helpers (create, get, poll with bounded waits, clean up)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tether.conformance import spec
from tether.conformance.check import Check, Status
from tether.conformance.client import Client, Exchange
from tether.conformance.requirements import FAILING_LEVELS, requirement

#: Fixture role → the official suite's tool name (`tether.testing.conformance` serves each).
#: `header_tool` has no fixed name: it is any tool whose inputSchema declares an `x-mcp-header`
#: argument.
DEFAULT_FIXTURES: Mapping[str, str | None] = {
    "greet": "greet",
    "slow_compute": "slow_compute",
    "failing_job": "failing_job",
    "protocol_error_job": "protocol_error_job",
    "confirm_delete": "confirm_delete",
    "multi_input": "multi_input",
    "test_tool_with_task": "test_tool_with_task",
    "test_missing_capability": "test_missing_capability",
    "test_tool_with_progress": "test_tool_with_progress",
    "header_tool": None,
}
#: The arguments each fixture is called with (besides slow_compute's `seconds`).
FIXTURE_ARGS: Mapping[str, Mapping[str, Any]] = {
    "greet": {"name": "conformance"},
    "slow_compute": {"label": "tether-conformance"},
    "confirm_delete": {"filename": "tether-conformance.txt"},
}
LONG_S = 3600  # slow_compute seconds for a task that stays working


@dataclass(frozen=True)
class Options:
    timeout: float = 10.0
    strict: bool = False
    fixtures: Mapping[str, str] = field(default_factory=dict)
    creations: int = 200
    min_poll_s: float = 0.02
    max_poll_s: float = 0.25
    #: How long to watch a task for something it must never do (item 122).
    observe_s: float = 1.0
    #: How long after its end a task must still be readable (item 104, the official suite's 500 ms).
    after_end_s: float = 0.5


@dataclass
class Created:
    """What a tools/call that may create a task returned."""

    exchange: Exchange
    task_id: str | None

    @property
    def result(self) -> dict[str, Any] | None:
        return self.exchange.result


@dataclass
class Polled:
    """The polls of one wait: every task view seen, the last exchange, and whether it ended
    by reaching the wanted state."""

    seen: list[dict[str, Any]]
    last: Exchange | None
    reached: bool

    @property
    def task(self) -> dict[str, Any] | None:
        return self.seen[-1] if self.seen else None


class Context:
    def __init__(self, client: Client, options: Options) -> None:
        self.client = client
        self.options = options
        self.checks: dict[str, Check] = {}
        #: The id of the scenario now running (each verdict is filed under it).
        self.scenario_id = ""
        self._tools: dict[str, dict[str, Any]] | None = None
        self._tools_error: str | None = None
        self._discover: dict[str, Any] | None = None
        self._status: dict[str, str] = {}

    # --- verdicts -------------------------------------------------------------------------------
    def record(
        self, check_id: str, status: Status, message: str, *exchanges: Exchange, **details: Any
    ) -> None:
        req = requirement(check_id)
        info: dict[str, Any] = dict(details)
        if exchanges:
            info["exchanges"] = [ex.details() for ex in exchanges]
        check = Check(check_id, status, message, req.ref, self.scenario_id, info)
        old = self.checks.get(check_id)
        self.checks[check_id] = old.worse(check) if old else check

    def passed(self, check_id: str, message: str, *exchanges: Exchange, **details: Any) -> None:
        self.record(check_id, "pass", message, *exchanges, **details)

    def violated(self, check_id: str, message: str, *exchanges: Exchange, **details: Any) -> None:
        """A deviation: a failure for MUST/S9 requirements (or with --strict), else a warning."""
        level = requirement(check_id).level
        status: Status = "fail" if level in FAILING_LEVELS or self.options.strict else "warn"
        self.record(check_id, status, message, *exchanges, **details)

    def verdict(
        self, check_id: str, problems: Sequence[str], ok: str, *exchanges: Exchange, **details: Any
    ) -> None:
        if problems:
            self.violated(check_id, "; ".join(problems), *exchanges, **details)
        else:
            self.passed(check_id, ok, *exchanges, **details)

    def skip(self, check_id: str, reason: str, *exchanges: Exchange) -> None:
        self.record(check_id, "skip", reason, *exchanges)

    def skip_all(self, check_ids: Collection[str], reason: str) -> None:
        for check_id in check_ids:
            if check_id not in self.checks:
                self.skip(check_id, reason)

    # --- server facts -------------------------------------------------------------------------
    async def discover(self) -> dict[str, Any] | None:
        if self._discover is None:
            ex = await self.client.call("server/discover", caps=spec.CAPS_NONE)
            self._discover = ex.result
        return self._discover

    async def tools(self) -> dict[str, dict[str, Any]] | None:
        """name → tool, over every page of tools/list (None if it could not be listed)."""
        if self._tools is not None or self._tools_error is not None:
            return self._tools
        tools: dict[str, dict[str, Any]] = {}
        params: dict[str, Any] = {}
        for _ in range(100):
            ex = await self.client.call("tools/list", params, caps=spec.CAPS_NONE)
            page = ex.result
            if page is None or not isinstance(page.get("tools"), list):
                self._tools_error = f"tools/list failed ({ex.summary()})"
                return None
            for tool in page["tools"]:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    tools[tool["name"]] = tool
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
            params = {"cursor": cursor}
        self._tools = tools
        return tools

    async def tool(self, role: str) -> str | None:
        """The tool playing fixture `role`, or None if the server does not offer it."""
        tools = await self.tools()
        if tools is None:
            return None
        name = self.options.fixtures.get(role) or DEFAULT_FIXTURES.get(role)
        if name is None and role == "header_tool":
            name = next((n for n, t in tools.items() if header_args(t)), None)
        return name if name in tools else None

    def missing(self, role: str) -> str:
        if self._tools_error:
            return f"fixture {role!r} unavailable: {self._tools_error}"
        name = self.options.fixtures.get(role) or DEFAULT_FIXTURES.get(role)
        if name is None:
            return f"fixture {role!r}: no tool declares an {spec.X_MCP_HEADER} argument"
        return f"fixture {role!r}: the server offers no tool named {name!r} (remap with --fixture)"

    async def need(self, role: str, check_ids: Collection[str]) -> str | None:
        """The fixture's tool name; when it is missing, skip `check_ids` with the reason."""
        name = await self.tool(role)
        if name is None:
            self.skip_all(check_ids, self.missing(role))
        return name

    # --- tasks ---------------------------------------------------------------------------------
    async def call_tool(
        self, name: str, role: str, *, caps: Any = spec.CAPS_TASKS, track: bool = True, **args: Any
    ) -> Created:
        """tools/call of a fixture; a created task is cancelled at cleanup unless `track` is
        false or it was seen ending."""
        arguments = {**FIXTURE_ARGS.get(role, {}), **args}
        ex = await self.client.call("tools/call", {"name": name, "arguments": arguments}, caps=caps)
        result = ex.result or {}
        task_id = result.get("taskId") if result.get("resultType") == "task" else None
        if isinstance(task_id, str) and task_id:
            if track:
                self._status[task_id] = str(result.get("status"))
            return Created(ex, task_id)
        return Created(ex, None)

    async def get(
        self,
        task_id: str,
        *,
        caps: Any = spec.CAPS_TASKS,
        headers: Mapping[str, str | None] | None = None,
    ) -> Exchange:
        ex = await self.client.call("tasks/get", {"taskId": task_id}, caps=caps, headers=headers)
        if task_id in self._status and isinstance((ex.result or {}).get("status"), str):
            self._status[task_id] = (ex.result or {})["status"]
        return ex

    async def poll(
        self,
        task_id: str,
        until: Collection[str] | Callable[[dict[str, Any]], bool],
        *,
        caps: Any = spec.CAPS_TASKS,
        timeout: float | None = None,
    ) -> Polled:
        """tasks/get until the task satisfies `until` (a status set or a predicate), an error
        comes back, or `timeout` (default: the run's timeout) passes."""
        done = until if callable(until) else (lambda t: t.get("status") in until)
        seen: list[dict[str, Any]] = []
        last: Exchange | None = None
        try:
            async with asyncio.timeout(timeout or self.options.timeout):
                while True:
                    last = await self.get(task_id, caps=caps)
                    if last.result is None:
                        return Polled(seen, last, False)
                    seen.append(last.result)
                    if done(last.result):
                        return Polled(seen, last, True)
                    await asyncio.sleep(self.poll_delay(last.result))
        except TimeoutError:
            return Polled(seen, last, False)

    def poll_delay(self, task: Mapping[str, Any]) -> float:
        """Honour the server's pollIntervalMs within the harness's bounds."""
        interval = task.get("pollIntervalMs")
        wanted = interval / 1000 if isinstance(interval, int) and interval > 0 else 0.0
        return min(max(wanted, self.options.min_poll_s), self.options.max_poll_s)

    async def cleanup(self) -> None:
        """Cancel, best effort, every task this run created that may still be running."""
        for task_id, status in list(self._status.items()):
            if status not in spec.TERMINAL:
                await self.client.call("tasks/cancel", {"taskId": task_id})
                self._status[task_id] = "cancelled"


def header_args(tool: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """argument → (header name, JSON type) for a tool's `x-mcp-header` arguments."""
    schema = tool.get("inputSchema")
    props = schema.get("properties") if isinstance(schema, dict) else None
    out: dict[str, tuple[str, str]] = {}
    for arg, prop in (props or {}).items():
        if isinstance(prop, dict) and isinstance(prop.get(spec.X_MCP_HEADER), str):
            out[arg] = (prop[spec.X_MCP_HEADER], str(prop.get("type", "string")))
    return out


def answer_for(request: Mapping[str, Any], tag: str) -> dict[str, Any]:
    """A plausible accepting answer to one input request, with string fields set to `tag`."""
    method = request.get("method")
    params = request.get("params") if isinstance(request.get("params"), dict) else {}
    if method == "sampling/createMessage":
        return {
            "role": "assistant",
            "content": {"type": "text", "text": tag},
            "model": "conformance",
        }
    if method == "roots/list":
        return {"roots": []}
    schema = params.get("requestedSchema") if isinstance(params, dict) else None
    props = schema.get("properties") if isinstance(schema, dict) else None
    content: dict[str, Any] = {}
    for name, prop in (props or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        if isinstance(prop.get("enum"), list) and prop["enum"]:
            content[name] = prop["enum"][0]
        elif prop.get("type") == "boolean":
            content[name] = True
        elif prop.get("type") in ("integer", "number"):
            content[name] = 1
        elif prop.get("type") == "array":
            content[name] = [tag]
        else:
            content[name] = tag
    return {"action": "accept", "content": content}
