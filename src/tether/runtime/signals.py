"""Control flow between workflow code and the executor. BaseException, so that a workflow's
`except Exception` cannot swallow a suspension, a cancellation or a continue-as-new."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


class Park(BaseException):
    """Stop executing: the run waits for input and/or a time (`wake_at`)."""

    def __init__(self, waits: list[dict[str, Any]], wake_at: datetime | None, *, status: str):
        super().__init__("park")
        self.waits = waits
        self.wake_at = wake_at
        self.status = status  # 'waiting' (input or timer) or 'pending' (retry backoff)


class CancelledRun(BaseException):
    """The run was asked to cancel; raised at the next durable call that is not a replay."""


@dataclass
class _ContinueAsNewData:
    input: Any
    workflow: str | None


class ContinueAsNew(BaseException):
    """End this run and start its successor with new input (same business id)."""

    def __init__(self, input_: Any, workflow: str | None) -> None:
        super().__init__("continue as new")
        self.data = _ContinueAsNewData(input_, workflow)


class LeaseGone(BaseException):
    """This worker no longer holds the run; stop without writing anything."""
