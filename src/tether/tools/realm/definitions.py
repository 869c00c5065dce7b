"""tools/list entries of the protocol tools served by this app (inputSchema from params.py)."""

from __future__ import annotations

from typing import Any, Final

from tether.runtime.registry import App
from tether.tools.realm import params

DESCRIPTIONS: Final = {
    "list_workflows": "The workflows this server can run.",
    "get_workflow_protocol": "A workflow's brief: its steps, who does each, and how to proceed.",
    "start_run": "Start a run of a workflow.",
    "start_run_batch": "Start a batch of runs of a single workflow.",
    "execute_step": "Give the answer to an agent step of a run (or run an engine step by name).",
    "submit_human_response": "Send the choice a person made at a run's open gate.",
    "advance_run": "Let the engine run the guards and automatic steps that are due.",
    "get_run_state": "Where a run is: its phase, its steps, and what can be called next.",
    "abandon_run": "Stop an open run for good.",
    "create_workflow": "Turn your own list of agent steps into a workflow and start a run of it.",
    "append_trace": "Buffer trace entries for an agent step that is not done yet.",
}
READ_ONLY: Final = frozenset({"list_workflows", "get_workflow_protocol", "get_run_state"})
#: The 11 tools, in tools/list order.
SERVED: Final = tuple(DESCRIPTIONS)


def realm_definitions(app: App) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "description": DESCRIPTIONS[name],
            "inputSchema": params.object_schema(params.TOOLS[name]),
            "annotations": {
                "readOnlyHint": name in READ_ONLY,
                "destructiveHint": name == "abandon_run",
                "openWorldHint": False,
            },
        }
        for name in SERVED
    ]
