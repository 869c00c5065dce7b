"""`bench/spec_limits.py` can fail: its verdict is the ratio against the ceiling, and with the
fault it guards against injected into its own server (documents parsed on the event loop) the
latency row turns OVER. The benchmark itself is never timed here."""

from __future__ import annotations

import argparse
import re
from types import ModuleType
from typing import Any

import pytest

from tests import repo_scripts

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROW = re.compile(r"^tasks/get p99 under documents\s+\S+\s+\S+\s+(\S+)\s+(\S+)\s+(ok|OVER)$", re.M)
STOP = re.compile(r"^SIGTERM while reading a document\s+(\S+)s\s+\S+\s+\S+\s+(ok|OVER)$", re.M)


def load_bench() -> ModuleType:
    return repo_scripts.load("bench/spec_limits.py", "bench_spec_limits")


def verdicts(out: str) -> tuple[float, str, str]:
    """(latency ratio, its verdict, the stop's verdict) as printed."""
    row, stop = ROW.search(out), STOP.search(out)
    assert row is not None and stop is not None, out
    assert float(row.group(2)) == 2.0
    return float(row.group(1)), row.group(3), stop.group(2)


def synthetic(bench: ModuleType, idle: float, loaded: float, stop_s: float) -> dict[str, Any]:
    return {
        "idle_p99_ms": [idle],
        "loaded_p99_ms": [loaded],
        "sent": bench.Sent(),
        "stop_s": stop_s,
        "grace_s": 10.0,
        "accepted_bytes": 1,
        "refused_bytes": 2,
        "parse_on_loop": False,
    }


@pytest.mark.parametrize(
    ("loaded", "stop_s", "want"),
    [(9.0, 1.0, (1.8, "ok", "ok")), (11.0, 11.0, (2.2, "OVER", "OVER"))],
)
def test_the_verdict_is_the_ratio_against_the_ceiling(
    loaded: float, stop_s: float, want: tuple[float, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_bench()
    bench.report(synthetic(bench, 5.0, loaded, stop_s))
    assert verdicts(capsys.readouterr().out) == want


def test_the_largest_documents_sit_at_the_limits() -> None:
    """The accepted one is exactly the byte limit with the most steps; the refused one is
    over it and within the HTTP body limit."""
    bench = load_bench()
    limits = bench.DEFAULTS
    accepted = bench.largest_accepted(limits.spec_max_bytes, limits.spec_max_steps)
    assert len(accepted.encode()) == limits.spec_max_bytes
    assert accepted.count("run: act") == limits.spec_max_steps
    refused = bench.largest_refused(limits.max_body_bytes)
    assert limits.spec_max_bytes < len(refused.encode()) < limits.max_body_bytes


async def test_documents_parsed_on_the_event_loop_turn_the_latency_row_over(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Our target's own check: with the fault injected in the bench's server, `tasks/get`
    waits behind each accepted document's parse, and the verdict says so."""
    bench = load_bench()
    args = argparse.Namespace(duration=2.0, warmup=0.5, rounds=1, parse_on_loop=True, only=None)
    m = await bench.measure(db_url, args)
    bench.report(m)
    out = capsys.readouterr().out
    assert "FAULT INJECTED" in out
    assert "largest accepted: conflict" in out  # read in full, then refused for its run id
    assert "largest refused: invalid_tool_input (TETHER_SPEC_MAX_BYTES)" in out
    ratio, verdict, stopped = verdicts(out)
    assert ratio > 2.0 and verdict == "OVER", out
    assert stopped == "ok", out
