"""Remote tasks, the requester side: a workflow calls a tool of another MCP server, or asks an
A2A agent, as a durable step of its own kind.

Modules: `config` (remotes by name, the checks when the app starts), `protocol` (the seam one
class per remote protocol implements), `mcp` (MCP with and without the Tasks extension), `a2a`
(A2A agents, with the A2A SDK's types: the optional `a2a` extra), `implementations` (the
protocols this installation speaks), `transport` (JSON-RPC over HTTP, the one place httpx is
called), `call` (the durable driver behind `Context.call_tool` and `Context.ask_agent`), `dag`
(`action: mcp.call` and `action: a2a.ask` steps), `errors` (what a call raises), `spec` (the
MCP facts it speaks).

It imports no storage and no surface: a call's records go through the run's context.
"""

from __future__ import annotations
