"""Batched starts: `Operations.start_many` starts many runs in one statement with
idempotency keys, queues, singletons, profiles, labels and tenants honoured per item, and an
outcome per item."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from tether.runtime import errors
from tether.runtime.admission import Admission, Profile
from tether.runtime.context import Context
from tether.runtime.operations import Started, StartRequest
from tether.runtime.operations.batching import MAX_BATCH
from tether.runtime.registry import App

from .conftest import Start

pytestmark = pytest.mark.postgres


class Params(BaseModel):
    region: str = "eu"
    size: int = 1


def _app() -> App:
    app = App()

    @app.workflow(labels=["team=data"])
    async def job(ctx: Context, params: Params) -> dict[str, Any]:
        return params.model_dump()

    @app.workflow(queue="solo")
    async def queued(ctx: Context) -> None:
        return None

    @app.workflow
    async def tags(ctx: Context, items: list[str]) -> list[str]:
        return items

    return app


ADMISSION = Admission(
    queues={"solo": 1}, profiles={"prod": Profile("prod", env={"S": "p"}, params={"size": 3})}
)


def _started(outcome: object) -> Started:
    assert isinstance(outcome, Started), outcome
    return outcome


async def test_a_batch_starts_each_item_with_its_own_options_in_one_statement(
    start: Start,
) -> None:
    """Valid items start (committed when the call returns, visible to a read right after),
    invalid ones get their own error and store nothing; keys dedupe against stored runs and
    within the batch; queues, profiles and labels apply per item."""
    async with start(_app(), ADMISSION, workers=0) as rt:
        held = await rt.ops.start("job", {"size": 2}, idempotency_key="held")
        out = await rt.ops.start_many(
            [
                StartRequest("job", {"size": 1}),
                StartRequest("job", {"size": "big"}),  # invalid input
                StartRequest("nope"),  # unknown workflow
                StartRequest("job", {"size": 2}, idempotency_key="held"),  # the stored run
                StartRequest("job", {"size": 9}, idempotency_key="held"),  # another input
                StartRequest("job", {}, idempotency_key="twice", profile="prod", labels=["x=1"]),
                StartRequest("job", {}, idempotency_key="twice", profile="prod", labels=["x=1"]),
                StartRequest("queued"),
                StartRequest("job", {"size": 2}, idempotency_key="held", on_live_match="fail"),
                StartRequest("tags", ["a", "b"]),  # a JSON array is one value, not a dimension
            ],
            by="test",
        )
        assert len(out) == 10
        assert _started(out[9]).execution.input == ["a", "b"]
        first = _started(out[0])
        assert not first.deduped and first.execution.input == {"region": "eu", "size": 1}
        assert isinstance(out[1], errors.InvalidInput)
        assert isinstance(out[2], errors.WorkflowNotFound)
        assert _started(out[3]).deduped and _started(out[3]).execution.id == held.execution.id
        assert isinstance(out[4], errors.IdempotencyMismatch)
        a, b = _started(out[5]), _started(out[6])
        assert (a.deduped, b.deduped) == (False, True) and a.execution.id == b.execution.id
        assert a.execution.input == {"region": "eu", "size": 3}
        assert a.execution.profile == "prod" and a.execution.labels == {"team": "data", "x": "1"}
        assert _started(out[7]).execution.queue == "solo"
        assert _started(out[7]).execution.wake_at is None  # queued: waits for admission
        assert isinstance(out[8], errors.RunAlreadyActive)
        assert await rt.pool.fetchval("SELECT count(*) FROM executions") == 5
        created = await rt.pool.fetch(
            "SELECT data FROM history WHERE type = 'created' AND execution_id = ANY($1::text[])",
            [first.execution.id, a.execution.id],
        )
        assert [r["data"] for r in created] == [{"by": "test"}] * 2
        seen = await rt.ops.get(first.execution.id)  # read-your-writes
        assert seen.current.status == "pending"


async def test_singleton_items_are_refused_per_item(start: Start) -> None:
    """A singleton item goes through the workflow's start lock: the second one is refused
    with SingletonConflict naming the first, and the other items still start."""
    async with start(_app(), ADMISSION, workers=0) as rt:
        out = await rt.ops.start_many(
            [
                StartRequest("job", {}, singleton="running"),
                StartRequest("job", {}, singleton="running"),
                StartRequest("job", {}, singleton="maybe"),  # type: ignore[arg-type]
            ]
        )
        first = _started(out[0])
        assert isinstance(out[1], errors.SingletonConflict)
        assert out[1].execution_id == first.execution.id
        assert isinstance(out[2], errors.InvalidInput)


async def test_a_tenant_scoped_batch_starts_the_tenants_runs(start: Start) -> None:
    """Keys are per tenant: the same key in two tenants makes two runs."""
    async with start(_app(), ADMISSION, workers=0) as rt:
        red = await rt.ops.scoped("red").start_many([StartRequest("job", {}, idempotency_key="k")])
        blue = await rt.ops.scoped("blue").start_many(
            [StartRequest("job", {}, idempotency_key="k")]
        )
        r, b = _started(red[0]), _started(blue[0])
        assert (r.execution.tenant, b.execution.tenant) == ("red", "blue")
        assert r.execution.id != b.execution.id and not b.deduped


async def test_a_batch_runs_and_an_oversized_batch_is_refused_whole(start: Start) -> None:
    """The workers run what a batch started; more than MAX_BATCH items changes nothing."""
    async with start(_app(), ADMISSION, workers=1) as rt:
        with pytest.raises(errors.InvalidInput, match="at most"):
            await rt.ops.start_many([StartRequest("job", {})] * (MAX_BATCH + 1))
        assert await rt.pool.fetchval("SELECT count(*) FROM executions") == 0
        out = await rt.ops.start_many([StartRequest("job", {"size": n}) for n in range(1, 21)])
        for n, outcome in enumerate(out, start=1):
            view = await rt.ops.wait_for_end(_started(outcome).execution.id, timeout=10)
            assert view.current.output == {"region": "eu", "size": n}
