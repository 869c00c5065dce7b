"""The change hub's safety net (runtime/changes.py): a worker's grouped checkpoints announce
their changes after the commit, so a worker killed in between loses the announcement; with
`sweep_s` the hub wakes every watcher that often, as after a reconnect, so a lost change
still reaches its subscribers."""

from __future__ import annotations

from tests.waiting import until
from tether.runtime.changes import ChangeHub


async def test_a_sweep_wakes_every_watcher_with_an_empty_payload_and_rearms() -> None:
    hub = ChangeHub(None, sweep_s=0.05)
    one: list[str] = []
    every: list[str] = []
    hub.watch(one.append, ["ex_a"])
    hub.watch_every(every.append)
    try:
        await until(lambda: len(one) >= 2 and len(every) >= 2, what="two sweeps")
    finally:
        hub.close()
    assert set(one) == set(every) == {""}  # "look again", never data
    assert len(one) >= 2 and len(every) >= 2  # re-armed: at least two sweeps woke both


async def test_no_sweep_without_sweep_s_and_none_after_close() -> None:
    quiet = ChangeHub(None)
    heard: list[str] = []
    quiet.watch(heard.append, ["ex_a"])
    swept = ChangeHub(None, sweep_s=0.05)
    swept.watch(heard.append, ["ex_b"])
    swept.close()
    # An open hub armed after `swept`: by its second sweep, `swept` would have swept twice.
    witness = ChangeHub(None, sweep_s=0.05)
    seen: list[str] = []
    witness.watch(seen.append, ["ex_c"])
    try:
        await until(lambda: len(seen) >= 2, what="two sweeps of an open hub")
    finally:
        witness.close()
    quiet.close()
    assert heard == []
