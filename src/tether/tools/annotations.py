"""MCP tool annotations (`ToolAnnotations` hints) that more than one tool surface gives."""

from __future__ import annotations

from typing import Final

#: A tool that reads and changes nothing (the catalog lets a reader call it).
READ_ONLY: Final = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
#: A tool that changes a run without destroying anything (start, signal, answer, update).
MUTATING: Final = {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False}
