"""Run scenarios against one server: a reachability probe, then each scenario in order (the
error-code hygiene scenario always last, over every reply of the run), each bounded in time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from tether.conformance.check import Check
from tether.conformance.client import Client
from tether.conformance.context import Context, Options
from tether.conformance.scenario import Scenario
from tether.conformance.scenarios import HYGIENE, SCENARIOS


class CannotRun(Exception):
    """The harness could not test the server at all (unreachable, no endpoint, refused)."""


def select(ids: Sequence[str] | None, *, hygiene: bool = True) -> list[Scenario]:
    """The scenarios to run, in order; hygiene is included last unless `hygiene` is false and
    it was not asked for by name.

    Raises:
        CannotRun: an id names no scenario.
    """
    known = {sc.id: sc for sc in SCENARIOS}
    tail = [HYGIENE] if hygiene or (ids and HYGIENE.id in ids) else []
    if not ids:
        return [*SCENARIOS, *tail]
    unknown = [i for i in ids if i not in known and i != HYGIENE.id]
    if unknown:
        raise CannotRun(f"unknown scenario(s): {', '.join(unknown)}; see --list")
    return [known[i] for i in known if i in ids] + tail


async def preflight(client: Client) -> None:
    """Raises CannotRun unless the URL answers like an MCP endpoint might."""
    ex = await client.call("server/discover")
    if ex.transport_error is not None:
        raise CannotRun(f"cannot reach {client.url}: {ex.transport_error}")
    if ex.status in (401, 403, 407):
        raise CannotRun(
            f"{client.url} refused the harness (HTTP {ex.status}); pass credentials with --header"
        )
    if ex.reply is None and ex.status is not None and ex.status >= 300:
        raise CannotRun(f"no MCP endpoint at {client.url} (HTTP {ex.status}, no JSON-RPC reply)")


async def run(
    client: Client,
    options: Options,
    scenario_ids: Sequence[str] | None = None,
    progress: Callable[[str], None] = lambda _: None,
    *,
    hygiene: bool = True,
) -> list[Check]:
    """Every verdict of the selected scenarios, in scenario order.

    Raises:
        CannotRun: the server could not be tested.
    """
    chosen = select(scenario_ids, hygiene=hygiene)
    await preflight(client)
    ctx = Context(client, options)
    budget = max(60.0, options.timeout * 10)
    for n, scenario in enumerate(chosen, 1):
        progress(f"[{n}/{len(chosen)}] {scenario.id}: {scenario.title}")
        ctx.scenario_id = scenario.id
        try:
            async with asyncio.timeout(budget):
                await scenario.run(ctx)
        except TimeoutError:
            _abort(ctx, scenario, f"scenario timed out after {budget:g}s")
        except Exception as exc:  # noqa: BLE001 — one broken scenario must not stop the others
            _abort(ctx, scenario, f"scenario aborted: {type(exc).__name__}: {exc}")
        finally:
            await ctx.cleanup()
        ctx.skip_all(
            scenario.checks, "not evaluated: an earlier step of the scenario did not get that far"
        )
    order = [c for sc in chosen for c in sc.checks]
    return [ctx.checks[c] for c in order if c in ctx.checks]


def _abort(ctx: Context, scenario: Scenario, message: str) -> None:
    for check_id in scenario.checks:
        if check_id not in ctx.checks:
            ctx.record(check_id, "fail", message)
