"""How a DAG wave awaits its durable calls together, and how it decides its asks (approval
gates and human tasks) — the part of the interpreter that must stay the same on every replay.

A wave's calls are started in the DAG's order, so each takes the same position on every
replay whatever finished first. An ask is opened with its wave and then waits on its own: it
is carried (its wait stays at its position) while the run goes on with every step that does
not depend on it, as Dagu holds up only a waiting step's dependents. Once nothing else can
run, the open asks are decided together, and the run parks on them until all are decided,
except that a decision ends the wait for the others at once, as Dagu does: a rejection ends
the run; a push-back resets its steps and the run goes on while the other asks keep waiting
(under the same keys), carried again.

An answer is applied only where the run decides its asks, never at the ask's own position: on
a replay an answer given since is found there, but carried to the decision as the first run
carried the open ask. Which asks were still open when a push-back let the run go on is
recorded (`dag:asks`), so a later replay applies an answer that came since where the run
applied it the first time, and every later call keeps its position. Each decision that lets
the run go on starts a new attempt (a recorded `uuid`), which is how a reader of the records
finds the decisions (`replay.fold`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from tether.runtime.context import Context
from tether.runtime.dag import gates
from tether.runtime.dag.replay import OPEN_ASKS
from tether.runtime.signals import Park


async def phase(calls: list[Any]) -> list[Any]:
    """Await one phase's durable calls together (started in order, so positions are fixed);
    parks once for all of them when any must wait."""
    if not calls:
        return []
    if len(calls) == 1:  # no task to wrap it in (a chain's every step)
        return [await calls[0]]
    return phase_results(await asyncio.gather(*calls, return_exceptions=True))


async def settle(calls: list[Any]) -> list[Any]:
    """The asks' results in order: an answer, or the Park of an ask still open."""
    if len(calls) == 1:
        try:
            return [await calls[0]]
        except Park as park:
            return [park]
    return list(await asyncio.gather(*calls, return_exceptions=True))


async def decide(
    ctx: Context, results: Mapping[str, Any], order: Sequence[str], attempt: str | None
) -> tuple[list[str], list[str]]:
    """The asks whose answers apply now (in the DAG's order) and the asks left open, or a
    Park for all the open ones (`attempt`: the run's attempt they wait under now)."""
    names = [n for n in order if n in results]
    for name in names:
        if isinstance(results[name], BaseException) and not isinstance(results[name], Park):
            raise results[name]
    answered = [n for n in names if isinstance(results[n], gates.Answer)]
    parked = [n for n in names if n not in answered]
    decisions = {results[n].payload.get("decision") for n in answered}
    if "push_back" in decisions and len(names) > 1:
        parked = await ctx.step(_still_open, parked, name=OPEN_ASKS, lazy=True)
        return [n for n in answered if n not in parked], parked
    if parked and "reject" not in decisions:
        parks = [_under(results[n], attempt) for n in parked]
        phase_results(parks)  # raises their Park
    return answered, parked


async def _still_open(parked: list[str]) -> list[str]:
    return parked


def _under(park: Park, attempt: str | None) -> Park:
    """A carried ask's Park as the run parks on it now: under the run's current attempt."""
    waits = [{**w, "attempt": attempt} if "attempt" in w else w for w in park.waits]
    return Park(waits, park.wake_at, status=park.status)


def phase_results(results: list[Any]) -> list[Any]:
    """The gathered results; one Park for the calls that wait, when any does."""
    parks = [r for r in results if isinstance(r, Park)]
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, Park):
            raise r
    if parks:
        waits = [w for p in parks for w in p.waits]
        wakes = [p.wake_at for p in parks if p.wake_at is not None]
        status = "waiting" if any(p.status == "waiting" for p in parks) else "pending"
        raise Park(waits, min(wakes) if wakes else None, status=status)
    return results
