"""Realm's step protocol as MCP tools: the 11 tools, their parameters and their reply
envelope. Imports the runtime, never storage."""
