"""Retry policy: a pure description of attempts and backoff."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


def seconds(value: float | timedelta | None) -> float | None:
    """A duration given as seconds or timedelta, as seconds (None stays None)."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


@dataclass(frozen=True)
class RetryPolicy:
    """How often to try, and how long to wait between tries (exponential backoff, capped).

    `max_attempts` counts every try, the first included: 1 means no retry.
    """

    max_attempts: int = 3
    initial_interval: float = 1.0
    backoff: float = 2.0
    max_interval: float = 60.0
    linear: bool = False  # the wait grows by `initial_interval` a failure (`backoff` unused)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_interval < 0 or self.max_interval < 0:
            raise ValueError("intervals must not be negative")
        if self.backoff < 1:
            raise ValueError("backoff must be at least 1")

    def delay(self, failed_attempts: int) -> float:
        """Seconds to wait after `failed_attempts` failures (1 = after the first try)."""
        if self.linear:
            return float(min(self.initial_interval * max(failed_attempts, 1), self.max_interval))
        exponent = max(failed_attempts - 1, 0)
        return float(min(self.initial_interval * self.backoff**exponent, self.max_interval))

    def allows_another(self, failed_attempts: int) -> bool:
        return failed_attempts < self.max_attempts


NO_RETRY = RetryPolicy(max_attempts=1, initial_interval=0.0)
