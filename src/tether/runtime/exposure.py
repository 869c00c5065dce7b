"""How a workflow is served over MCP: `App.workflow(expose=Exposure(...))`. Pure data; the tool
catalog (tools/catalog.py) reads it to build the tools and to decide which runs are tasks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TaskSupport = Literal["optional", "required"]


@dataclass(frozen=True)
class Exposure:
    """How a workflow is served over MCP, given to [`App.workflow`][tether.App.workflow] as
    `expose=`. Each way of serving it has one spelling:

    - `Exposure()` (the default): nothing; runs start from the CLI, `tether.client` or a
      plain tool.
    - `Exposure(tool_set=True)`: the generated tools `start_<wf>`, `<wf>_status`,
      `<wf>_watch`, `signal_<wf>`, `answer_<wf>`, `<wf>_update_<u>`; its runs are tasks.
    - `Exposure(tool=True)` or `Exposure(tool="name")`: the workflow as one tool, a task for a
      client with the Tasks extension; for any other client the call waits for the end.
    - `Exposure(tool=True, task_support="required")`: that tool refuses a client without
      the Tasks extension (`-32021`).
    - `Exposure(tasks=True)`: no tool; its runs (a plain tool hands them back) are tasks.

    `tool_set` and `tool` combine (both sets of tools); `tasks` is for a workflow with neither,
    since both already serve its runs as tasks.

    Example:
        ```python
        @app.workflow(expose=tether.Exposure(tool_set=True))
        async def review(ctx: tether.Context, pr: PullRequest) -> Verdict: ...
        ```

    Attributes:
        tool_set: Publish the generated tool set: `start_<wf>`, `<wf>_status`, `<wf>_watch`,
            `signal_<wf>`, `answer_<wf>`, and one `<wf>_update_<u>` per update registered
            with `mcp=True`.
        tool: Publish the workflow itself as one tool whose arguments are its input (`True`:
            named after the workflow; a string: that name). Called by a client that declares
            the Tasks extension it starts a task; otherwise the call waits for the run's end
            (at most `TETHER_SYNC_LIMIT_S`).
        task_support: With `tool`: `"required"` refuses a call from a client without the
            Tasks extension (-32021) instead of waiting; `"optional"` (default) waits.
        tasks: Serve the workflow's runs as MCP tasks without publishing any tool of it (for
            a run a plain tool starts and hands back).

    Raises:
        ValueError: `task_support="required"` without `tool`, `tasks=True` with `tool_set`
            or `tool`, or an empty tool name.
    """

    tool_set: bool = False
    tool: bool | str = False
    task_support: TaskSupport = "optional"
    tasks: bool = False

    def __post_init__(self) -> None:
        if self.tool == "":
            raise ValueError("Exposure(tool=...): a tool name must not be empty")
        if self.task_support == "required" and self.tool is False:
            raise ValueError(
                'Exposure(task_support="required") applies to the workflow\'s one tool: '
                "give tool=True (or its name) too"
            )
        if self.tasks and (self.tool_set or self.tool is not False):
            raise ValueError(
                "Exposure(tasks=True) is for a workflow served by no tool: tool_set and tool "
                "serve its runs as tasks already, so drop tasks=True"
            )

    def tool_name(self, workflow: str) -> str | None:
        """The name of the workflow's one tool (`tool`), or None when it has none."""
        if self.tool is False:
            return None
        return workflow if self.tool is True else self.tool


#: A workflow served over MCP by nothing (the default of `App.workflow`).
NOT_EXPOSED: Exposure = Exposure()
