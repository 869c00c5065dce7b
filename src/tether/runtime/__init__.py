"""Durable runtime: registry, replay executor, waits, timers, workers, retention, operations,
and what every surface shows of a run's history (its timeline).

Owns workflow semantics. Imports storage; never jsonrpc, tasks, tools or app.
"""

from __future__ import annotations
