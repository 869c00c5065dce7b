"""The MCP server methods that are not tools or tasks: server/discover, the legacy
`initialize` handshake, prompts, resources (incl. run resources) and completion."""

from __future__ import annotations
