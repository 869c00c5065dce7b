"""Durable runtime: registry, replay executor, waits, timers, workers, retention, operations.

Owns workflow semantics. Imports storage; never jsonrpc, tasks, tools or app.
"""

from __future__ import annotations
