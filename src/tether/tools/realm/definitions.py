"""tools/list entries of Realm's tools served by this app (inputSchema from params.py)."""

from __future__ import annotations

from typing import Any, Final

from tether.runtime.registry import App
from tether.tools.realm import params

DESCRIPTIONS: Final = {
    "list_workflows": "Lists the registered workflows.",
    "get_workflow_protocol": "Describes one workflow's steps and the rules for running it.",
    "start_run": "Starts a run.",
    "start_run_batch": "Starts several runs of one workflow.",
    "execute_step": "Does one step, with the assistant's answer.",
    "submit_human_response": "Passes on a person's choice at a gate.",
    "advance_run": "Runs the guards and automatic steps a run owes.",
    "get_run_state": "Returns where a run stands.",
    "abandon_run": "Ends an open run.",
    "create_workflow": "Makes a workflow from a list of steps and starts a run of it.",
    "append_trace": "Records notes about a step before the step is done.",
}
READ_ONLY: Final = frozenset({"list_workflows", "get_workflow_protocol", "get_run_state"})
#: Realm's 11 tools, in tools/list order.
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
