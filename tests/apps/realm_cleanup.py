"""A protocol app whose cleanup step `tidy` has no handler until a test registers one
(`provide_tidy`): its ending leaves `tidy` pending (tests/e2e/test_realm_cleanup.py)."""

from __future__ import annotations

from typing import Any

from tether.runtime.registry import App

PROTOCOL = """
id: cleanup_owed
name: Cleanup owed
version: 1
steps:
  draft:
    description: Draft it
    execution: agent
  tidy:
    description: Tidy up
    execution: finalizer
    handler: tidy
    on_outcome: always
"""

TIDIED: list[str] = []

app = App("realm-cleanup")
app.protocol(PROTOCOL)


def tidy(inputs: dict[str, Any]) -> dict[str, Any]:
    TIDIED.append(inputs["steps"]["draft"]["text"])
    return {"tidied": True}


def provide_tidy() -> None:
    """Give the serving process the cleanup step's handler (as a redeploy would)."""
    if "tidy" not in app.functions:
        app.function()(tidy)
