"""Singleton starts, runtime profiles and labels (modelled on Dagu's)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from tether.runtime import errors
from tether.runtime.admission import Admission, Profile
from tether.runtime.context import Context
from tether.runtime.registry import App

from .conftest import Start

pytestmark = pytest.mark.postgres


class Params(BaseModel):
    region: str = "eu"
    size: int = 1


def _app() -> App:
    app = App()

    @app.workflow(labels=["team=data", "nightly"])
    async def job(ctx: Context, params: Params) -> dict[str, Any]:
        return params.model_dump()

    @app.workflow(queue="solo")
    async def queued(ctx: Context) -> None:
        return None

    return app


PROFILES = {"prod": Profile("prod", env={"STAGE": "prod"}, params={"region": "us", "size": 3})}


async def test_concurrent_singleton_starts_let_exactly_one_through(start: Start) -> None:
    """Twelve singleton starts at once from two runtimes: one run is created, the others are
    refused with SingletonConflict naming it (Dagu: 409); a later start is refused too."""
    app = _app()
    async with start(app, Admission(), workers=0) as one, start(app, Admission(), workers=0) as two:
        calls = [
            (one if i % 2 else two).ops.start("job", {}, singleton="running") for i in range(12)
        ]
        results = await asyncio.gather(*calls, return_exceptions=True)
        wins = [r for r in results if not isinstance(r, BaseException)]
        losses = [r for r in results if isinstance(r, BaseException)]
        assert len(wins) == 1
        assert all(isinstance(e, errors.SingletonConflict) for e in losses), losses
        assert {e.execution_id for e in losses if isinstance(e, errors.SingletonConflict)} == {
            wins[0].execution.id
        }
        assert await one.pool.fetchval("SELECT count(*) FROM executions") == 1
        with pytest.raises(errors.SingletonConflict):
            await one.ops.start("job", {}, singleton="active")


async def test_a_singleton_start_with_the_same_idempotency_key_returns_the_run(
    start: Start,
) -> None:
    """A retried singleton start (same key) is the same start, not a conflict."""
    async with start(_app(), Admission(), workers=0) as rt:
        a = await rt.ops.start("job", {}, singleton="running", idempotency_key="k")
        b = await rt.ops.start("job", {}, singleton="running", idempotency_key="k")
    assert b.deduped and b.execution.id == a.execution.id


async def test_singleton_running_ignores_queued_runs_and_active_counts_them(
    start: Start,
) -> None:
    """`running` (Dagu's start) refuses only while a run is admitted; `active` (Dagu's
    enqueue) also while one waits in its queue. Our choice: Dagu does not say whether its start
    refuses queued runs."""
    async with start(_app(), Admission(queues={"solo": 1}), workers=0) as rt:
        first = await rt.ops.start("queued")  # no worker: it stays queued
        assert first.execution.queued
        with pytest.raises(errors.SingletonConflict):
            await rt.ops.start("queued", singleton="active")
        second = await rt.ops.start("queued", singleton="running")
    assert second.execution.queued


async def test_an_unknown_profile_is_not_found_and_stores_nothing(start: Start) -> None:
    """Dagu: an unknown profile → 404."""
    async with start(_app(), Admission(profiles=PROFILES), workers=0) as rt:
        with pytest.raises(errors.ProfileNotFound) as caught:
            await rt.ops.start("job", {}, profile="staging")
        assert isinstance(caught.value, errors.WorkflowNotFound)  # mapped as not found
        assert await rt.pool.fetchval("SELECT count(*) FROM executions") == 0


async def test_a_profile_s_params_go_under_the_caller_s_and_its_env_is_kept(start: Start) -> None:
    """The caller's input wins key by key; the profile's env is stored with the run."""
    async with start(_app(), Admission(profiles=PROFILES), workers=1) as rt:
        run = await rt.ops.start("job", {"size": 5}, profile="prod")
        view = await rt.ops.wait_for_end(run.execution.id, timeout=10)
    assert run.execution.input == {"region": "us", "size": 5}
    assert view.current.output == {"region": "us", "size": 5}
    assert (view.current.profile, view.current.profile_env) == ("prod", {"STAGE": "prod"})


async def test_runs_are_filtered_by_labels(start: Start) -> None:
    """Labels from the workflow and the start are merged (keys lowercased); `key=value`
    matches exactly, a bare `key` matches any value, every filter must hold."""
    async with start(_app(), Admission(), workers=0) as rt:
        a = await rt.ops.start("job", {}, labels=["Owner=ann"])
        b = await rt.ops.start("job", {}, labels={"owner": "bob", "team": "ops"})
        assert a.execution.labels == {"team": "data", "nightly": "", "owner": "ann"}

        async def ids(*labels: str) -> set[str]:
            return {r.id for r in (await rt.ops.list_runs(labels=list(labels))).items}

        assert await ids("owner=ann") == {a.execution.id}
        assert await ids("team=data") == {a.execution.id}
        assert await ids("owner") == {a.execution.id, b.execution.id}
        assert await ids("nightly", "owner=bob") == {b.execution.id}
        assert await ids("owner=carl") == set()
        with pytest.raises(errors.InvalidInput):
            await rt.ops.list_runs(labels=["-bad"])
        with pytest.raises(errors.InvalidInput):
            await rt.ops.start("job", {}, labels=["ok=bad value"])
        assert await rt.pool.fetchval("SELECT count(*) FROM executions") == 2
