"""The poller's decision for one due poll (`RemotePoller._look`), the remote scripted with
respx: an unchanged task is polled again after its interval, a changed or ended one (or a
failed request) wakes its run, an ended call or run drops the poll, a running run is looked at
again soon, and a record this process cannot open is left to one that can."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.runtime.remote.fake import URL, FakeRemote, completed, task
from tether.runtime.remote.clients import Clients
from tether.runtime.remote.config import Remote
from tether.runtime.remote.poller import BUSY_AGAIN_S, Look, RemotePoller
from tether.storage.errors import UnknownKey
from tether.storage.remote_polls import DuePoll, _due
from tether.storage.rows import StepRecord

REMOTE = Remote("peer", URL, poll_min_s=0.5, poll_max_s=30.0)


def _poller() -> RemotePoller:
    return RemotePoller(None, {"peer": REMOTE}, Clients(), lease_s=7.0)  # type: ignore[arg-type]  # no database is touched here


def _due_poll(status: str = "waiting", *, done: bool = False, **state: Any) -> DuePoll:
    result = {"remote": "peer", "tool": "work", "task": "tk_1", "seen": "working:", **state}
    return DuePoll("ex_1", 3, status, StepRecord(3, "remote", "peer/work", result, done))


async def _look(poll: DuePoll, *answers: Any) -> Look:
    fake = FakeRemote({"tasks/get": list(answers) or [task("working")]})
    with fake.mounted(URL):
        return await _poller()._look(poll)


async def test_an_unchanged_task_is_polled_again_after_its_interval() -> None:
    assert await _look(_due_poll(), task("working", pollIntervalMs=2000)) == Look("again", 2.0)


async def test_a_task_found_unchanged_is_followed_by_a_process_that_did_not_park_it() -> None:
    """Our choice: after a restart (or in another process) the runs are parked already; the
    poller's first poll of each task tells the follower of it."""
    poller = _poller()
    fake = FakeRemote({"tasks/get": [task("working")]})
    with fake.mounted(URL):
        assert (await poller._look(_due_poll())).verdict == "again"
    assert poller.follower.watched("peer") == {"tk_1"}


@pytest.mark.parametrize(
    "answer",
    [
        completed("done"),
        task("input_required", inputRequests={}),
        task("failed", error={"code": 1, "message": "x"}),
        httpx.Response(503),
        httpx.ConnectError("down"),
    ],
    ids=["ended", "changed", "failed", "5xx", "unreachable"],
)
async def test_a_changed_task_or_a_failed_request_wakes_the_run(answer: Any) -> None:
    """The run polls again itself and decides (its backoff, its error, its next park)."""
    assert await _look(_due_poll(), answer) == Look("wake")


@pytest.mark.parametrize(
    ("poll", "want"),
    [
        (_due_poll(done=True), Look("drop")),
        (_due_poll("completed"), Look("drop")),
        (DuePoll("ex_1", 3, "waiting", None), Look("drop")),
        (_due_poll(task=None), Look("drop")),
        (_due_poll("running"), Look("again", BUSY_AGAIN_S)),
        (_due_poll(remote="gone"), Look("wake")),
        (DuePoll("ex_1", 3, "waiting", None, unreadable=True), Look("again", 7.0)),
    ],
    ids=["call-ended", "run-ended", "no-record", "no-task", "running", "unknown", "sealed"],
)
async def test_a_poll_the_poller_need_not_send_is_decided_without_a_request(
    poll: DuePoll, want: Look
) -> None:
    fake = FakeRemote({})
    with fake.mounted(URL):
        assert await _poller()._look(poll) == want
    assert fake.seen == []


def test_a_record_sealed_with_a_key_this_process_lacks_is_unreadable_not_an_error() -> None:
    """One such record does not stop the poller's other polls: it reads as `unreadable`."""
    envelope = {"$enc": "v1", "kid": "nobody", "n": "AAAA", "c": "AAAA"}
    row = {"execution_id": "ex_1", "seq": 3, "status": "waiting", "kind": "remote"}
    row |= {"name": "peer/work", "result": envelope, "done": False}
    with pytest.raises(UnknownKey):  # what reading it raises …
        StepRecord.from_mapping(row, "ex_1")
    assert _due(row) == DuePoll("ex_1", 3, "waiting", None, unreadable=True)  # … here: a flag
