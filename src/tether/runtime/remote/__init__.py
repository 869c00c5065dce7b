"""Remote tasks, the requester side: a workflow calls a tool of another MCP server (and, with
another protocol class, an agent) as a durable step of its own kind.

Modules: `config` (remotes by name, the checks when the app starts), `protocol` (the seam one
class per remote protocol implements), `mcp` (MCP with and without the Tasks extension),
`implementations` (the protocols this version speaks), `transport` (JSON-RPC over HTTP, the
one place httpx is called), `call` (the durable driver behind `Context.call_tool`), `dag`
(`action: mcp.call` steps), `errors` (what a call raises), `spec` (the MCP facts it speaks).

It imports no storage and no surface: a call's records go through the run's context.
"""

from __future__ import annotations
