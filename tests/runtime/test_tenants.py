"""Tenant scoping in the operations API (docs/deploying.md, "Tenants"): a scoped Operations sees and
steers only its tenant's runs, another tenant's run reads exactly as a missing one, the runs it
starts (and their successors) belong to it, and idempotency keys are per tenant."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from tether.principal import Principal
from tether.runtime import errors
from tether.runtime.context import Context
from tether.runtime.ids import new_execution_id
from tether.runtime.operations import Operations
from tether.runtime.registry import App

from .conftest import Start

pytestmark = pytest.mark.postgres


class Step(BaseModel):
    n: int = 0


class Note(BaseModel):
    text: str


def tenant_app() -> App:
    app = App()

    @app.workflow
    async def parked(ctx: Context) -> Any:
        return await ctx.approval("go", prompt="Go?")

    @app.workflow
    async def chained(ctx: Context, s: Step) -> int:
        if s.n < 1:
            ctx.continue_as_new(Step(n=s.n + 1))
        return s.n

    @app.workflow
    async def failing(ctx: Context) -> None:
        raise ValueError("no")

    @app.update("parked")
    async def note(ctx: object, n: Note) -> str:
        return n.text

    return app


async def test_scoped_operations_are_cached_and_only_narrow(db: object) -> None:
    """ops.scoped(t) is built once per tenant (the hot path pays a lookup), a scoped view
    asked for its own tenant is itself, and it cannot widen or switch to another tenant."""
    ops = Operations(db, tenant_app())  # type: ignore[arg-type]
    acme = ops.scoped("acme")
    assert ops.scoped("acme") is acme and acme.scoped("acme") is acme
    assert (acme.tenant, acme.every_tenant, ops.every_tenant) == ("acme", False, True)
    assert acme.env.reader is ops.env.reader  # one row reader: reads still coalesce
    with pytest.raises(errors.InvalidInput):
        acme.scoped("globex")
    with pytest.raises(errors.InvalidInput):
        acme.scoped(None)
    with pytest.raises(errors.InvalidInput):
        ops.scoped("bad tenant!")


async def test_each_principal_gets_the_operations_of_its_scope(db: object) -> None:
    """ops.for_principal, the one rule every surface asks: an admin bound to no tenant gets
    every tenant's operations; any other principal its tenant's (unbound: the runs with no
    tenant), as does a request without a principal; each is the cached scoped operations, and
    scoped operations stay as narrow as they are."""
    ops = Operations(db, tenant_app())  # type: ignore[arg-type]
    assert ops.for_principal(Principal("root", "admin")) is ops
    assert ops.for_principal(Principal("ann", "operator", "acme")) is ops.scoped("acme")
    assert ops.for_principal(Principal("boss", "admin", "acme")) is ops.scoped("acme")
    assert ops.for_principal(Principal("ro", "reader")) is ops.scoped(None)
    assert ops.for_principal(None) is ops.scoped(None)
    acme = ops.scoped("acme")
    assert acme.for_principal(Principal("root", "admin")) is acme
    with pytest.raises(errors.InvalidInput):
        acme.for_principal(Principal("bob", "operator", "globex"))


async def test_another_tenants_run_reads_exactly_as_a_missing_one(db: object) -> None:
    """Every operation on another tenant's run raises ExecutionNotFound with the message a
    missing run of that id gets; the run is untouched (no oracle, no change)."""
    ops = Operations(db, tenant_app())  # type: ignore[arg-type]
    acme, globex = ops.scoped("acme"), ops.scoped("globex")
    run = (await acme.start("parked")).execution
    missing = new_execution_id()
    calls: list[Callable[[Operations, str], Awaitable[Any]]] = [
        lambda o, i: o.get(i),
        lambda o, i: o.history(i),
        lambda o, i: o.steps(i),
        lambda o, i: o.answer(i, "k", True),
        lambda o, i: o.answer_wait(i, "go", True),
        lambda o, i: o.answer_many(i, [("k", True)]),
        lambda o, i: o.signal(i, "go"),
        lambda o, i: o.update(i, "note", {"text": "x"}, timeout=1),
        lambda o, i: o.cancel(i),
        lambda o, i: o.terminate(i),
        lambda o, i: o.again(i),
        lambda o, i: o.again(i, business_id="same"),
        lambda o, i: o.wait_until(i, lambda r: True, timeout=1),
    ]
    before = await db.fetchrow("SELECT * FROM executions WHERE id = $1", run.id)  # type: ignore[attr-defined]
    for call in calls:
        for scope in (globex, ops.scoped(None)):
            with pytest.raises(errors.ExecutionNotFound) as hidden:
                await call(scope, run.id)
            with pytest.raises(errors.ExecutionNotFound) as absent:
                await call(scope, missing)
            assert hidden.value.message == absent.value.message.replace(missing, run.id)
    after = await db.fetchrow("SELECT * FROM executions WHERE id = $1", run.id)  # type: ignore[attr-defined]
    assert after == before
    assert (await acme.get(run.id)).current.id == run.id
    assert (await ops.get(run.id)).current.tenant == "acme"  # every-tenant scope sees it


async def test_lists_show_only_the_callers_tenant(db: object) -> None:
    """A scoped list holds only its tenant's runs (None: the runs with no tenant), paging
    included; the every-tenant list holds them all."""
    ops = Operations(db, tenant_app())  # type: ignore[arg-type]
    ids: dict[str | None, set[str]] = {"acme": set(), "globex": set(), None: set()}
    for tenant in ("acme", "globex", None, "acme", "globex", None, "acme"):
        ids[tenant].add((await ops.scoped(tenant).start("parked")).execution.id)
    for tenant, expected in ids.items():
        seen: set[str] = set()
        cursor = None
        while True:
            page = await ops.scoped(tenant).list_runs(limit=1, cursor=cursor)
            seen |= {r.id for r in page.items}
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == expected
    everything = await ops.list_runs(workflow="parked")
    assert {r.id for r in everything.items} == set().union(*ids.values())


async def test_idempotency_keys_are_per_tenant(db: object) -> None:
    """The same key in two tenants starts two runs; a repeat within a tenant dedupes to its own
    run, never the other tenant's."""
    ops = Operations(db, tenant_app())  # type: ignore[arg-type]
    a1 = await ops.scoped("acme").start("parked", idempotency_key="k")
    g1 = await ops.scoped("globex").start("parked", idempotency_key="k")
    n1 = await ops.start("parked", idempotency_key="k")
    a2 = await ops.scoped("acme").start("parked", idempotency_key="k")
    g2 = await ops.scoped("globex").start("parked", idempotency_key="k")
    assert len({a1.execution.id, g1.execution.id, n1.execution.id}) == 3
    assert (a2.execution.id, a2.deduped) == (a1.execution.id, True)
    assert (g2.execution.id, g2.deduped) == (g1.execution.id, True)
    assert (a1.execution.tenant, g1.execution.tenant, n1.execution.tenant) == (
        "acme",
        "globex",
        None,
    )


async def test_successors_inherit_the_tenant(start: Start) -> None:
    """Continue-as-new, retry and rerun runs belong to the tenant of the run they follow, and
    a handle resolves along the chain within the tenant."""
    async with start(tenant_app()) as rt:
        acme = rt.ops.scoped("acme")
        chained = (await acme.start("chained", {"n": 0})).execution
        view = await acme.wait_for_end(chained.id, timeout=10)
        assert view.current.id != chained.id and view.current.status == "completed"
        assert {r.tenant for r in view.chain} == {"acme"}

        failed = (await acme.start("failing")).execution
        await acme.wait_for_end(failed.id, timeout=10)
        retried = await acme.again(failed.id)
        assert retried.tenant == "acme"
        await acme.wait_for_end(retried.id, timeout=10)
        rerun = await rt.ops.again(retried.id, business_id="same")  # every-tenant keeps it too
        assert rerun.tenant == "acme"
        with pytest.raises(errors.ExecutionNotFound):
            await rt.ops.scoped("globex").get(failed.id)


async def test_a_chain_is_followed_only_within_the_tenant(db: object) -> None:
    """Were a successor ever in another tenant, a scoped handle stops before it: the caller
    sees its own run as the end of the chain, never the other tenant's row."""
    ops = Operations(db, tenant_app())  # type: ignore[arg-type]
    mine = (await ops.scoped("acme").start("parked")).execution
    theirs = (await ops.scoped("globex").start("parked")).execution
    await db.execute(  # type: ignore[attr-defined]
        "UPDATE executions SET successor_id = $2 WHERE id = $1", mine.id, theirs.id
    )
    view = await ops.scoped("acme").get(mine.id)
    assert view.current.id == mine.id
    assert [r.id for r in view.chain] == [mine.id]
    assert (await ops.get(mine.id)).current.id == theirs.id  # the every-tenant scope follows
