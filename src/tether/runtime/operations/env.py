"""What every operation runs with: the pool, the App, the listener, the row reader, the
payload cap and the admission configuration, plus the helpers they share (change
subscriptions, poll interval, payload check)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from tether.runtime import errors
from tether.runtime.admission import NO_ADMISSION, Admission
from tether.runtime.registry import App
from tether.storage.coalesce import RowReader
from tether.storage.driver import Database, Notifications

DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
POLL_FALLBACK_S = 0.25


@dataclass(frozen=True)
class Env:
    """Shared by every operation; holds no run state."""

    pool: Database
    app: App
    listener: Notifications | None = None
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    reader: RowReader = field(init=False)
    admission: Admission = NO_ADMISSION  # queues and profiles (runtime/admission.py)

    def __post_init__(self) -> None:
        # A quarter of the pool for concurrent single-row reads; more readers share statements.
        # (Tests may hand in one connection instead of a pool: then one statement at a time.)
        max_size = getattr(self.pool, "get_max_size", None)
        size = max_size() if callable(max_size) else 1
        object.__setattr__(self, "reader", RowReader(self.pool, max_statements=max(1, size // 4)))

    def subscribe(self, channel: str, callback: Callable[[str, str], None]) -> Callable[[], None]:
        """Call `callback` on each notification on `channel`; returns the unsubscribe."""
        if self.listener is None:
            return lambda: None
        return self.listener.subscribe(channel, callback)

    def poll_s(self) -> float:
        """How long to wait for a notification before re-reading anyway."""
        listening = self.listener is not None and self.listener.ready.is_set()
        return 2.0 if listening else POLL_FALLBACK_S

    def check_payload(
        self, value: Any, error: type[errors.AnswerRejected] | type[errors.InvalidInput]
    ) -> None:
        """Refuse a payload over the size cap, or one holding a NUL character (PostgreSQL
        cannot store it in text or jsonb), before anything is stored."""
        raw = orjson.dumps(value)
        if len(raw) > self.max_payload_bytes:
            problem = f"(root): payload larger than {self.max_payload_bytes} bytes"
        elif b"\\u0000" in raw:
            problem = "(root): text may not contain the NUL character (U+0000)"
        else:
            return
        if error is errors.AnswerRejected:
            raise errors.AnswerRejected(problem, errors=[problem])
        raise errors.InvalidInput(problem, [{"loc": [], "msg": problem, "type": "value_error"}])
