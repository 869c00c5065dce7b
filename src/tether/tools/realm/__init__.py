"""Realm's step protocol as MCP tools: the 11 tools, their parameters and their reply envelope
(seeds/realm-mcp-tools.md, spec/REALM-PROTOCOL.md). Imports the runtime, never storage."""
