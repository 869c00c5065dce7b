"""What a scenario is: `Scenario` (protocol) and `FunctionScenario` (one made of a coroutine
function). Scenarios record their verdicts (`check.Check`) through a `Context`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from tether.conformance.context import Context


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
