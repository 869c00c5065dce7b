"""`bench/remote.py` can fail: its verdicts are ratios against ceilings, and with the fault it
guards against injected (a call that waits a poll interval before its first look) the call
row turns OVER. The benchmark is never timed here."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests import repo_scripts

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CALL = re.compile(
    r"^remote call median vs direct client\s+\S+\s+\S+\s+(\S+)\s+(\S+)\s+(ok|OVER)$", re.M
)
POLLS = re.compile(
    r"^most polls of one task in the window\s+\S+\s+\S+\s+\S+\s+\S+\s+(ok|OVER)$", re.M
)
REPLAYS = re.compile(r"^runs replayed while they wait\s+\S+\s+(\S+)\s+(ok|OVER)$", re.M)


def load_bench() -> ModuleType:
    return repo_scripts.load("bench/remote.py", "bench_remote")


def call_verdict(out: str) -> tuple[float, str]:
    row = CALL.search(out)
    assert row is not None, out
    assert float(row.group(2)) == 2.0
    return float(row.group(1)), row.group(3)


def _hold(polls: list[int], replays: int) -> dict[str, Any]:
    return {
        "tasks": len(polls),
        "setup_s": 1.0,
        "duration_s": 10.0,
        "interval_s": 1.0,
        "polls": polls,
        "replays": replays,
        "cpu_s": 0.5,
    }


@pytest.mark.parametrize(
    ("durable", "want"), [([3.0, 3.8, 4.0], (1.9, "ok")), ([4.0, 4.4, 5.0], (2.2, "OVER"))]
)
def test_the_call_verdict_is_the_ratio_against_the_ceiling(
    durable: list[float], want: tuple[float, str], capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_bench()
    calls = {"durable_ms": durable, "direct_ms": [1.0, 2.0, 3.0], "fault": False}
    bench.report(calls, None)
    assert call_verdict(capsys.readouterr().out) == want


@pytest.mark.parametrize(
    ("polls", "replays", "want"),
    [([10, 11, 9], 0, ("ok", "ok")), ([10, 12, 9], 0, ("OVER", "ok")), ([10], 3, ("ok", "OVER"))],
)
def test_the_hold_verdicts_are_polls_within_the_interval_and_no_replay(
    polls: list[int], replays: int, want: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """At most duration / interval + 1 polls of one task (11 here); no run replayed."""
    bench = load_bench()
    bench.report(None, _hold(polls, replays))
    out = capsys.readouterr().out
    poll_row, replay_row = POLLS.search(out), REPLAYS.search(out)
    assert poll_row is not None and replay_row is not None, out
    assert (poll_row.group(1), replay_row.group(2)) == want


async def test_a_first_poll_after_an_interval_turns_the_call_row_over(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Our target's own check: with the fault injected, the durable call waits a poll
    interval before it looks, and the verdict says so."""
    bench = load_bench()
    calls = await bench.measure_calls(db_url, 6, True, tmp_path)
    bench.report(calls, None)
    out = capsys.readouterr().out
    assert "FAULT INJECTED" in out
    ratio, verdict = call_verdict(out)
    assert ratio > 2.0 and verdict == "OVER", out


async def test_a_call_row_sample_is_the_calls_first_execution_even_when_the_run_replays(
    db_url: str, tmp_path: Path
) -> None:
    """Our choice: with every remote task `working` for 300 ms, each durable call parks and its
    run is replayed; each sample still spans the call itself, never the replay's read of it."""
    bench = load_bench()
    calls = await bench.measure_calls(db_url, 3, False, tmp_path, hold_s=0.3)
    assert calls["claimed"] > 1, calls  # the run did park and replay
    assert len(calls["durable_ms"]) == len(calls["direct_ms"]) == 3, calls
    assert min(calls["durable_ms"]) >= 300.0, calls
    assert min(calls["direct_ms"]) >= 300.0, calls


async def test_a_short_hold_polls_within_the_interval_and_replays_nothing(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hold part end to end, small: a few parked tasks, polled by the poller only."""
    bench = load_bench()
    hold = await bench.measure_hold(db_url, 4, 2.5, 200, tmp_path)
    bench.report(None, hold)
    out = capsys.readouterr().out
    assert sum(hold["polls"]) >= 4, out  # the poller did poll
    poll_row, replay_row = POLLS.search(out), REPLAYS.search(out)
    assert poll_row is not None and replay_row is not None, out
    assert (poll_row.group(1), replay_row.group(2)) == ("ok", "ok"), out
