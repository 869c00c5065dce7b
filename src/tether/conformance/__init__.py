"""A black-box conformance harness for MCP 2026-07-28 servers with the Tasks extension.

It tests any server by URL (`tether-conformance --url URL`), so it imports nothing else from
tether: it keeps its own copy of the spec constants (`spec`), speaks raw JSON-RPC over httpx
(`client`), and maps every check to the spec and to tests/conformance/CHECKLIST.md
(`requirements`).
"""

from __future__ import annotations
