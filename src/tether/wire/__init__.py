"""What every JSON-RPC surface (the tasks methods, the tools, the MCP server's resources) puts on
the wire the same way over the runtime: the one runtime → JSON-RPC error table (`errors`) and
the wire form of a timestamp (`timestamps`).

A layer between the surfaces and the runtime: it imports `runtime` and `jsonrpc`, and no
surface, so each surface takes these from here rather than from another surface.
"""

from __future__ import annotations
