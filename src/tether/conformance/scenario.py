"""What a scenario is and what it produces: `Scenario` (protocol) and `Check` (one verdict)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from tether.conformance.context import Context

Status = Literal["pass", "fail", "warn", "skip"]
#: How bad each status is, for merging two verdicts on one check.
SEVERITY: Mapping[Status, int] = {"skip": 0, "pass": 1, "warn": 2, "fail": 3}


@dataclass(frozen=True)
class Check:
    """One verdict: the check id, its status, a one-line message, the spec reference, and the
    details that decided it (the request/response exchanges among them)."""

    id: str
    status: Status
    message: str
    spec_ref: str
    scenario: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)

    def worse(self, other: Check) -> Check:
        """The more severe of two verdicts on the same check (the first on a tie)."""
        return other if SEVERITY[other.status] > SEVERITY[self.status] else self


class Scenario(Protocol):
    """A group of checks on one area, run against one server through a `Context`."""

    @property
    def id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def checks(self) -> tuple[str, ...]:
        """Every check id this scenario can record (each must be in `requirements`)."""
        ...

    async def run(self, ctx: Context) -> None:
        """Probe the server and record a verdict per check through `ctx`."""
        ...


@dataclass(frozen=True)
class FunctionScenario:
    """A `Scenario` made of a coroutine function."""

    id: str
    title: str
    checks: tuple[str, ...]
    fn: Callable[[Context], Awaitable[None]]

    async def run(self, ctx: Context) -> None:
        await self.fn(ctx)
