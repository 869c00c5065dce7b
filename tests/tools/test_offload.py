"""The document worker (`tether.tools.offload`): calls run in another process at a lower CPU
priority, results and exceptions come back whole, and a worker that dies fails the calls it
held and is replaced by the next call."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest

from tests.tools.worker_calls import (
    EVENTS,
    Noted,
    Opaque,
    each,
    exit_worker,
    no_parts,
    parts,
    raise_opaque,
)
from tether.runtime.realm.plan import plan_from_text
from tether.specs.dag import LimitExceeded, every_step, load_string
from tether.specs.limits import MAX_STEPS_SETTING, SpecLimits
from tether.tools import offload

SPEC = """\
name: shapes
steps:
  - name: a
    run: act
    with: {size: 3, tags: [x, y]}
  - name: b
    run: act
    depends: [a]
handlerOn:
  failure:
    run: act
"""

PLAN = """\
{"id": "p", "name": "p", "version": 1, "steps": {"s": {"description": "do it",
 "execution": "agent", "input_schema": {"type": "object", "required": ["n"],
 "properties": {"n": {"type": "integer"}}}}}}
"""


@pytest.fixture(autouse=True)
async def stopped() -> AsyncIterator[None]:
    """Each test starts without a worker and leaves none behind."""
    offload.shutdown(wait=True)
    yield
    offload.shutdown(wait=True)


async def test_a_call_runs_in_another_process_at_a_lower_priority() -> None:
    """Our choice: the OS serves the event loop (and PostgreSQL) before the documents."""
    assert await offload.run(os.getpid) != os.getpid()
    assert await offload.run(os.nice, 0) == min(os.nice(0) + offload.NICENESS, 19)


async def test_a_spec_comes_back_equal_to_the_one_loaded_here() -> None:
    """Our choice: its frozen mappings (`with`, handlers) cross as the dicts they wrap."""
    here = load_string(SPEC)
    there = await offload.run(load_string, SPEC)
    assert there == here
    assert there.steps[0].work.with_ == {"size": 3, "tags": ["x", "y"]}  # type: ignore[union-attr]  # an Action


async def test_a_plan_comes_back_and_its_schemas_still_validate() -> None:
    """Our choice: a schema crosses as its document; its validator is built where it is used."""
    plan = await offload.run(plan_from_text, PLAN)
    assert plan == plan_from_text(PLAN)
    schema = plan.spec.steps["s"].input_schema
    assert schema is not None
    assert schema.violations({"n": 1}) == []
    assert [v.keyword for v in schema.violations({})] == ["required"]


async def test_an_exception_comes_back_with_its_fields() -> None:
    """Our choice: a refusal raised in the worker is raised here, naming its limit."""
    with pytest.raises(LimitExceeded) as caught:
        await offload.run(load_string, SPEC, limits=SpecLimits(max_steps=1))
    assert (caught.value.setting, caught.value.maximum) == (MAX_STEPS_SETTING, 1)
    assert str(caught.value) == str(_refusal(SpecLimits(max_steps=1)))


async def test_an_exception_that_cannot_be_rebuilt_comes_back_as_a_runtime_error() -> None:
    """Our choice: the caller still gets an error naming it, and the worker stays up."""
    with pytest.raises(RuntimeError, match=Opaque.__qualname__):
        await offload.run(raise_opaque)
    pid = await offload.run(os.getpid)
    with pytest.raises(RuntimeError):
        await offload.run(raise_opaque)
    assert await offload.run(os.getpid) == pid


async def test_a_worker_that_dies_fails_its_call_and_the_next_call_starts_a_new_one() -> None:
    """Our choice: the death of the worker costs the calls it held, not the server."""
    first = await offload.run(os.getpid)
    with pytest.raises(offload.WorkerLost):
        await offload.run(exit_worker)
    second = await offload.run(os.getpid)
    assert second not in (first, os.getpid())


async def test_a_call_queued_behind_one_that_kills_the_worker_fails_too() -> None:
    """Our choice (a known limit): calls the dead worker held are not retried; each fails
    with WorkerLost rather than waiting, and the next call is served."""
    outcomes = await asyncio.gather(
        offload.run(exit_worker), offload.run(os.getpid), return_exceptions=True
    )
    assert [type(o) for o in outcomes] == [offload.WorkerLost, offload.WorkerLost]
    assert await offload.run(os.getpid) != os.getpid()


async def test_shutdown_ends_the_worker_and_a_later_call_starts_another() -> None:
    """Our choice: the app's lifespan stops the worker on the way out."""
    first = await offload.run(os.getpid)
    offload.shutdown(wait=True)
    with pytest.raises(ProcessLookupError):
        os.kill(first, 0)
    assert await offload.run(os.getpid) not in (first, os.getpid())


def _refusal(limits: SpecLimits) -> LimitExceeded:
    try:
        load_string(SPEC, limits=limits)
    except LimitExceeded as exc:
        return exc
    raise AssertionError("not refused")


async def test_the_worker_stops_when_the_last_server_using_it_stops() -> None:
    """Our choice: servers in one process share the worker; one stopping leaves it to the
    others, and the last one stops it."""
    with offload.in_use():
        with offload.in_use():
            first = await offload.run(os.getpid)
        assert await offload.run(os.getpid) == first
    assert await offload.run(os.getpid) != first


async def test_a_spec_in_pieces_comes_back_equal_sharing_what_it_shared() -> None:
    """Our choice: its steps cross one by one ahead of it, through one pickler's memo, so an
    object its steps share (a default `continueOn`) is one object here too."""
    here = load_string(SPEC)
    there = await offload.run_in_pieces(every_step, load_string, SPEC)
    assert there == here
    assert there.steps[0].continue_on is there.steps[1].continue_on
    assert (there.runs_shell, there.function_names) == (False, frozenset({"act"}))


async def test_a_result_in_pieces_is_rebuilt_between_other_work_on_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Our choice: its parts are unpickled a slice at a time (one part a slice here), the
    loop running other work between slices, so a large result does not hold it."""
    monkeypatch.setattr(offload, "SLICE_S", 0.0)
    EVENTS.clear()
    result = await offload.run_in_pieces(each, parts, 3)
    assert [p.n for p in result] == [0, 1, 2]
    assert EVENTS == [("part", 0), ("turn", 0), ("part", 1), ("turn", 1), ("part", 2), ("turn", 2)]


async def test_parts_that_fail_in_the_worker_raise_their_exception_here() -> None:
    """Our choice: `parts` runs in the worker, and what it raises is raised here."""
    with pytest.raises(LookupError):
        await offload.run_in_pieces(no_parts, os.getpid)


async def test_parts_let_go_in_pieces_are_freed_between_other_work_on_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Our choice: what may be the last references to a document's parts are dropped a
    slice at a time (one part a slice here)."""
    monkeypatch.setattr(offload, "SLICE_S", 0.0)
    EVENTS.clear()
    held = [Noted(0), Noted(1)]
    await offload.drop_in_pieces(held)
    await asyncio.sleep(0)  # the turn after the last
    assert held == []
    assert EVENTS == [("freed", 1), ("turn", 1), ("freed", 0), ("turn", 0)]
