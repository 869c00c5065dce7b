"""MCP tool surfaces over the runtime: the generated workflow tools (Harvest), workflows served
as task-capable tools, and plain tools. Imports runtime, tasks and jsonrpc.
"""

from __future__ import annotations
