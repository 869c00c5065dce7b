"""MCP task views over durable executions: a task is computed from its execution row (and its
chain) on every read; nothing about a task is stored. Imports runtime and jsonrpc only.
"""

from __future__ import annotations
