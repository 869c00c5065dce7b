"""Whether and how often an `auto` step is tried (pure but for the recorded looks).

- `capable`: the step runs only once the process has its handler and the input its
  `input_map` builds fits its `input_schema` (the checks before a step is claimed). Until
  then it "cannot run here (capability)" or "cannot run (input_schema)": each look is a
  recorded call, then the run waits on signal `realm.capability.<step>`, which `advance_run`
  sends to look again.
- `retry_of`: the step's `retry` block as a `RetryPolicy`, and which errors it retries: only an
  error marked retryable (an exception whose `retryable` attribute is True, raised by the
  handler: `marked` wraps it as `RetryableFailure`), and a timed-out attempt when
  `retry.on_timeout` is set. Nothing else is retried.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Final

from tether.runtime.context import Context
from tether.runtime.functions import Functions
from tether.runtime.policy import RetryPolicy
from tether.runtime.realm.plan import PlanStep
from tether.specs.realm import Violation, templates, validate_payload

CAPABILITY: Final = "realm.capability."


class RetryableFailure(Exception):
    """A handler's error marked retryable (its message is `<type>: <message>`)."""


@contextlib.contextmanager
def marked() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        if getattr(exc, "retryable", False) is True:
            raise RetryableFailure(f"{type(exc).__name__}: {exc}") from exc
        raise


def retry_of(step: PlanStep) -> tuple[RetryPolicy | None, Callable[[Exception], bool] | None]:
    r = step.spec.retry
    if r is None or r.max_attempts <= 1:
        return None, None
    policy = RetryPolicy(
        max_attempts=r.max_attempts,
        initial_interval=r.base_delay_ms / 1000,
        backoff=2.0 if r.backoff == "exponential" else 1.0,
        max_interval=r.max_delay_ms / 1000 if r.max_delay_ms is not None else 3600.0,
        linear=r.backoff == "linear",
    )
    on_timeout = r.on_timeout

    def retryable(exc: Exception) -> bool:
        return isinstance(exc, RetryableFailure) or (on_timeout and isinstance(exc, TimeoutError))

    return policy, retryable


async def refusal(
    functions: Functions, step: PlanStep, params: dict[str, Any], outputs: dict[str, Any]
) -> str | None:
    """Why the auto step cannot run (None: it can)."""
    if step.handler not in functions:
        return f"here (capability): this server has no handler '{step.handler}'"
    if step.spec.input_schema is None:
        return None
    given = templates.resolve_input_map(step.spec.input_map, params, outputs)
    found = validate_payload(step.spec.input_schema, given if step.spec.input_map else params)
    if not found:
        return None
    return (
        f"(input_schema): the input built for step '{step.id}' does not fit its input_schema: "
        f"{_first(found[0])}"
    )


def _first(v: Violation) -> str:
    """The first violation: the field it names (`the input` at the root, else `'a.b'`) and its
    message; for a property the schema forbids, that property's own name."""
    segments = [p for p in v.instance_path.split("/") if p]
    extra = v.params.get("additionalProperty")
    if v.keyword == "additionalProperties" and isinstance(extra, str):
        return f"'{'.'.join([*segments, extra])}' is not a property the schema allows"
    name = f"'{'.'.join(segments)}'" if segments else "the input"
    return f"{name} {v.message}"


async def capable(
    ctx: Context,
    functions: Functions,
    step: PlanStep,
    params: dict[str, Any],
    outputs: dict[str, Any],
) -> None:
    """Wait until the step can run; a step without a handler always can."""
    if step.handler is None:
        return
    name = f"realm:capability:{step.id}"
    while why := await ctx.step(refusal, functions, step, params, outputs, name=name, lazy=True):
        await ctx.wait_for_signal(f"{CAPABILITY}{step.id}", prompt=why)
