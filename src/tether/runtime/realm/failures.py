"""How a protocol run's steps fail, as the interpreter raises them (pure).

`Exhausted` is an agent step whose refused answers reached its `validation_exhaustion`
threshold in `mode: fail`: the tool delivers a marker answer (`EXHAUSTED_KEY`, by
`EXHAUSTED_BY`) to the step's open wait, unchecked, and the step's wait raises it. The step
has failed: the run goes on when a dependent runs on failures, else it fails and its `fail`
finalizers run, as after any step failure.
"""

from __future__ import annotations

from typing import Any, Final

EXHAUSTED_KEY: Final = "$realm_validation_exhausted"
EXHAUSTED_BY: Final = "realm:validation_exhaustion"
FINAL_PREFIX: Final = "realm:final:"
CLEANUP_PENDING: Final = "cleanup_pending"


class GuardAborted(Exception):
    """A guard's condition was false: the run ends `aborted` (phase) with its abort message."""

    def __init__(self, step: str, reason: str | None) -> None:
        super().__init__(reason or f"Guard step '{step}' aborted the run.")
        self.step = step
        self.reason = reason


class GateExpired(GuardAborted):
    """A gate's time ran out with `on_expiry: abort`: the run ends `aborted`, with no answer."""


class GuardResolutionError(Exception):
    """A guard's condition named nothing: the run fails at that guard."""


class GateMessageError(Exception):
    """A gate's `message` cannot be rendered (`<code>: <detail>`, code
    GATE_MESSAGE_UNRESOLVABLE or FILTER_UNKNOWN): the gate does not open and the run waits."""

    def __init__(self, step: str, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.step = step


class Exhausted(Exception):
    """An agent step spent its budget of refused answers (`VALIDATION_EXHAUSTED: <detail>`)."""

    def __init__(self, step: str, detail: str) -> None:
        super().__init__(f"VALIDATION_EXHAUSTED: {detail}")
        self.step = step


def exhausted_marker(response: Any, by: str | None) -> str | None:
    """The detail of an exhaustion marker answer (None: an ordinary answer)."""
    if by != EXHAUSTED_BY or not isinstance(response, dict) or set(response) != {EXHAUSTED_KEY}:
        return None
    return str(response[EXHAUSTED_KEY])


def left_pending(handler: str) -> dict[str, str]:
    """What a finalizer whose handler this process lacks records: it is left pending."""
    return {CLEANUP_PENDING: f"this server has no handler '{handler}'"}


def is_left_pending(name: str, result: Any) -> bool:
    """Whether a step record is a finalizer left pending (`left_pending`'s value)."""
    value = result.get("value") if isinstance(result, dict) else None
    return name.startswith(FINAL_PREFIX) and isinstance(value, dict) and CLEANUP_PENDING in value
