"""Retry policy: a pure description of attempts and backoff."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from tether.runtime import clock


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

    Given to [`Context.step`][tether.Context.step] (the step's tries) or to
    [`App.workflow`][tether.App.workflow] (the run's). The wait after the n-th failure is
    `initial_interval * backoff ** (n - 1)` seconds, or `initial_interval * n` when `linear`,
    and never more than `max_interval`.

    Example:
        ```python
        await ctx.step(charge, order, retry=tether.RetryPolicy(max_attempts=5))
        ```

    Args:
        max_attempts: Every try counts, the first included: 1 means no retry.
        initial_interval: Seconds to wait after the first failure.
        backoff: The factor the wait grows by after each further failure (at least 1).
        max_interval: The longest wait, in seconds.
        linear: Grow the wait by `initial_interval` after each failure instead (`backoff`
            is then unused).

    Raises:
        ValueError: `max_attempts` is below 1, an interval is negative, or `backoff` is
            below 1.
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


@dataclass(frozen=True)
class TotalTimeout:
    """A step's bound on all its tries together, waits included, from its first try's start
    (`first_at`, kept in the step's record between tries): each try is cut to the time left,
    and a retry whose wait would pass the bound is not made."""

    first_at: str
    total: float | None

    @classmethod
    def since(cls, first_at: str | None, total: float | None) -> TotalTimeout:
        return cls(first_at or clock.now().isoformat(), total)

    def _end(self) -> datetime:
        return datetime.fromisoformat(self.first_at) + timedelta(seconds=self.total or 0)

    def clip(self, timeout: float | None) -> float | None:
        if self.total is None:
            return timeout
        left = max((self._end() - clock.now()).total_seconds(), 0.0)
        return left if timeout is None else min(timeout, left)

    def passed_by(self, when: datetime) -> bool:
        return self.total is not None and when > self._end()

    @staticmethod
    def stopped(failures: int) -> str:
        return f" (retries stopped by total_timeout after {failures} attempts)"
