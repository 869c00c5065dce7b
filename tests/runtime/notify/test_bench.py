"""`bench/notify.py` can fail: with the sender's wake-up taken away (it only polls), its
latency row turns OVER. The benchmark is never timed here; only that its verdict follows a
gross slowdown, on a tiny run."""

from __future__ import annotations

import argparse
from types import ModuleType

import pytest

from tests import repo_scripts

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def load_bench() -> ModuleType:
    return repo_scripts.load("bench/notify.py", "bench_notify")


def tiny(fault: str | None) -> argparse.Namespace:
    return argparse.Namespace(samples=3, burst=0, fault=fault, fault_poll_s=1.0)


def test_the_verdict_is_ok_within_the_ceiling_and_over_past_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The report's verdict compares the p99 with the 200 ms ceiling."""
    bench = load_bench()
    assert bench.report({"latency_ms": [5.0] * 10}, tiny(None))
    assert not bench.report({"latency_ms": [5.0] * 9 + [250.0]}, tiny(None))
    burst = {"runs": 3, "rows": 3, "accepted": 3, "accepted_twice": 1, "requests": 5,
             "refused": 1, "elapsed_s": 0.1}  # fmt: skip
    assert not bench.report({"latency_ms": [5.0], "burst": burst}, tiny(None))
    out = capsys.readouterr().out
    assert out.count(" ok\n") == 2 and out.count(" OVER\n") == 2


async def test_a_sender_without_its_wake_up_turns_the_latency_verdict_over(
    db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Injected fault: the sender only polls (every second), so p99 passes 200 ms."""
    bench = load_bench()
    monkeypatch.setenv(bench.URL_ENV, "")
    monkeypatch.setenv(bench.SECRET_ENV, "")
    args = tiny("no-wake")
    measured = await bench.measure(db_url, args)
    assert not bench.report(measured, args)
    assert "OVER" in capsys.readouterr().out
