"""The client behaves the same over the database and over HTTP (each test runs over both
transports against a real server on loopback): start, wait, answer, result, cancel,
idempotent starts, unknown runs, refused answers, watching. Our choice (docs/client.md)."""

from __future__ import annotations

import contextlib
import itertools

import pytest

from tests.apps.client import Outcome
from tether.client import (
    AnswerRefused,
    Client,
    InvalidInput,
    RunCancelled,
    RunFailed,
    RunNotFound,
    RunSnapshot,
    StartConflict,
    UnexpectedResult,
    WaitTimedOut,
    WorkflowNotFound,
)

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

WAIT_S = 15.0


async def test_a_started_run_waits_for_its_approval_and_completes_once_answered(
    connected: Client,
) -> None:
    """start → input_required (the approval as an open wait) → answer by name → completed,
    the output validated into the result type."""
    run = await connected.start("review", {"title": "Q3"}, result_type=Outcome)
    waiting = await run.wait(timeout=WAIT_S)
    assert waiting.status == "input_required" and waiting.id == run.id
    (wait,) = waiting.waits
    assert (wait.kind, wait.name) == ("approval", "publish")
    assert wait.key.startswith(f"{run.id}:approval:publish:")
    assert "ticket" in wait.form["properties"] and wait.message == "Publish Q3?"
    answered = await run.answer("publish", {"decision": "approve", "ticket": "CHG-42"})
    assert answered.key == wait.key
    outcome = await run.result(timeout=WAIT_S)
    assert outcome == Outcome(title="Q3", decision="approved", ticket="CHG-42")
    ended = await run.status()
    assert ended.status == "completed" and ended.ended
    assert ended.output == {"title": "Q3", "decision": "approved", "ticket": "CHG-42"}


async def test_an_answer_by_key_is_taken_like_one_by_name(connected: Client) -> None:
    """The wait's key answers it as its name does."""
    run = await connected.start("review", {"title": "K"})
    (wait,) = (await run.wait(timeout=WAIT_S)).waits
    await run.answer(wait.key, {"decision": "reject", "reason": "not now"})
    assert await run.result(timeout=WAIT_S) == {
        "title": "K",
        "decision": "rejected: not now",
        "ticket": None,
    }


async def test_an_answer_that_does_not_fit_is_refused_and_the_wait_stays_open(
    connected: Client,
) -> None:
    """A missing required input is refused with a violation naming it; the run is unchanged."""
    run = await connected.start("review", {"title": "R"})
    before = await run.wait(timeout=WAIT_S)
    with pytest.raises(AnswerRefused) as refused:
        await run.answer("publish", {"decision": "approve"})
    assert any("ticket" in v for v in refused.value.violations)
    assert await run.status() == before


async def test_an_answer_no_open_wait_matches_is_refused_naming_the_open_ones(
    connected: Client,
) -> None:
    """A name no open wait has is refused; `open_waits` holds the keys open now."""
    run = await connected.start("review", {"title": "N"})
    (wait,) = (await run.wait(timeout=WAIT_S)).waits
    with pytest.raises(AnswerRefused) as refused:
        await run.answer("unpublish", {"decision": "approve", "ticket": "T"})
    assert refused.value.open_waits == (wait.key,)
    assert (await run.status()).waits == (wait,)


async def test_cancelling_a_waiting_run_ends_it_cancelled(connected: Client) -> None:
    """cancel → the run ends cancelled and result() raises RunCancelled; a second cancel of
    the ended run changes nothing."""
    run = await connected.start("review", {"title": "C"})
    await run.wait(timeout=WAIT_S)
    await run.cancel()
    with pytest.raises(RunCancelled):
        await run.result(timeout=WAIT_S)
    ended = await run.status()
    assert ended.status == "cancelled"
    await run.cancel()
    assert await run.status() == ended


async def test_the_same_idempotency_key_returns_the_same_run(connected: Client) -> None:
    """A repeated start with the same key and input is the first run; with other input it is
    a StartConflict."""
    first = await connected.start("review", {"title": "I"}, idempotency_key="order-7")
    again = await connected.start("review", {"title": "I"}, idempotency_key="order-7")
    other = await connected.start("review", {"title": "I"}, idempotency_key="order-8")
    assert again.id == first.id and other.id != first.id
    with pytest.raises(StartConflict):
        await connected.start("review", {"title": "J"}, idempotency_key="order-7")


async def test_a_key_a_header_cannot_carry_still_dedupes(connected: Client) -> None:
    """A key with spaces at its ends or non-ASCII text is kept whole (over HTTP it goes in
    `_meta` instead of the header, which would trim or refuse it)."""
    key = " café "
    first = await connected.start("review", {"title": "U"}, idempotency_key=key)
    again = await connected.start("review", {"title": "U"}, idempotency_key=key)
    trimmed = await connected.start("review", {"title": "U"}, idempotency_key="café")
    assert again.id == first.id and trimmed.id != first.id


async def test_an_unknown_run_is_not_found(connected: Client) -> None:
    """Reading, answering, cancelling or watching a run no one has is RunNotFound."""
    run = connected.get_handle("ex_nosuchrun")
    with pytest.raises(RunNotFound):
        await run.status()
    with pytest.raises(RunNotFound):
        await run.answer("publish", {"decision": "approve", "ticket": "T"})
    with pytest.raises(RunNotFound):
        await run.cancel()
    with pytest.raises(RunNotFound):
        await run.wait(timeout=WAIT_S)


async def test_an_unknown_workflow_is_not_found(connected: Client) -> None:
    """Starting a workflow no one registered is WorkflowNotFound."""
    with pytest.raises(WorkflowNotFound):
        await connected.start("no_such_workflow", {})


async def test_input_the_workflow_refuses_is_invalid_input(connected: Client) -> None:
    """The input is checked against the workflow's model; each problem is one violation."""
    with pytest.raises(InvalidInput) as refused:
        await connected.start("review", {"title": 7, "colour": "red"})
    assert sorted(v.split(":")[0] for v in refused.value.violations) == ["colour", "title"]


async def test_a_failed_run_raises_run_failed_with_its_error(connected: Client) -> None:
    """A workflow that raises ends failed; result() raises RunFailed carrying its error."""
    run = await connected.start("boom", {})
    with pytest.raises(RunFailed) as failed:
        await run.result(timeout=WAIT_S)
    assert (failed.value.error.kind, failed.value.error.message) == ("ValueError", "it broke")
    assert (await run.status()).status == "failed"


async def test_a_string_output_comes_back_as_the_string(connected: Client) -> None:
    """A workflow returning text: result() is that text."""
    run = await connected.start("echo", {"text": "hello there"}, result_type=str)
    assert await run.result(timeout=WAIT_S) == "hello there"


async def test_an_output_that_does_not_fit_the_result_type_is_unexpected(
    connected: Client,
) -> None:
    """result_type is checked when the result is read."""
    run = connected.get_handle((await connected.start("echo", {"text": "x"})).id, result_type=int)
    with pytest.raises(UnexpectedResult):
        await run.result(timeout=WAIT_S)


async def test_a_wait_whose_answer_is_not_a_flat_object_takes_the_answer_itself(
    connected: Client,
) -> None:
    """A signal with a nested schema is answered with the object itself (over HTTP the
    client puts it in the form's one `payload` field as JSON text)."""
    run = await connected.start("shaped", {})
    (wait,) = (await run.wait(timeout=WAIT_S)).waits
    assert (wait.kind, wait.name) == ("signal", "shape")
    await run.answer("shape", {"corners": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]})
    assert await run.result(timeout=WAIT_S) == {"corners": 2, "first": {"x": 1, "y": 2}}


async def test_waiting_past_the_timeout_raises_wait_timed_out(connected: Client) -> None:
    """A run parked on an approval does not end within the timeout."""
    run = await connected.start("review", {"title": "T"})
    await run.wait(timeout=WAIT_S)
    with pytest.raises(WaitTimedOut):
        await run.wait(until="ended", timeout=0.3)
    assert (await run.status()).needs_input


async def test_watch_yields_each_change_until_the_run_ends(connected: Client) -> None:
    """watch() starts from the present, shows the open wait, and ends after the ended view;
    no two snapshots in a row are the same."""
    run = await connected.start("review", {"title": "W"})
    seen: list[RunSnapshot] = []
    async with contextlib.aclosing(run.watch()) as changes:
        async for snapshot in changes:
            seen.append(snapshot)
            if snapshot.needs_input:
                await run.answer("publish", {"decision": "approve", "ticket": "W-1"})
    assert seen[-1].status == "completed"
    assert any(s.needs_input for s in seen)
    assert all(a != b for a, b in itertools.pairwise(seen))
    assert [s for s in seen if s.ended] == [seen[-1]]
