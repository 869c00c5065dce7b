"""`bench/dags.py` can fail: with a fault injected into the DAG side (a step made slower),
each target row it prints turns OVER. The benchmark itself is never timed here; only that its
verdict follows a gross slowdown (several times the target) on a tiny run."""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
from types import ModuleType
from typing import Any

import pytest

from tests import repo_scripts
from tether.runtime.dag import interpreter, work

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def load_bench() -> ModuleType:
    return repo_scripts.load("bench/dags.py", "bench_dags")


def tiny() -> argparse.Namespace:
    return argparse.Namespace(
        steps=3,
        width=3,
        shell_steps=4,
        repeat=1,
        shell_command="echo step",
        poll=1.0,
        default_gc=True,
    )


def verdicts(out: str) -> dict[str, tuple[float, str]]:
    """Each target row's ratio and verdict (ok / OVER), by case."""
    rows = re.findall(r"^(chain|fanout|shell)\s+\S+\s+\S+\s+(\S+)\s+\S+\s+(ok|OVER)$", out, re.M)
    return {case: (float(ratio), verdict) for case, ratio, verdict in rows}


def synthetic(ratio: float) -> dict[str, Any]:
    """Measurements whose every DAG run takes `ratio` times its baseline run."""
    runs = {name: [1.0, 2.0, 3.0] for name in ("shell_flush", "durable", "relaxed")}
    for dag, base in (
        ("chain", "chain_plain"),
        ("fanout", "fanout_plain"),
        ("shell", "shell_loop"),
    ):
        runs[base] = [1.0, 2.0, 3.0]
        runs[dag] = [ratio * t for t in runs[base]]
    m: dict[str, Any] = {name: sorted(times)[1] for name, times in runs.items()}
    m.update(runs=runs, commit=0.001, shell_median_run=2.0, shell_command=1.0, shell_write=0.1)
    m.update(shell_writes=1.0)
    return m


@pytest.mark.parametrize(
    ("ratio", "want"),
    [(1.2, {"chain": "ok", "fanout": "ok", "shell": "ok"}),
     (1.4, {"chain": "OVER", "fanout": "OVER", "shell": "ok"}),
     (1.6, {"chain": "OVER", "fanout": "OVER", "shell": "OVER"})],
)  # fmt: skip
def test_the_verdict_is_the_ratio_against_the_target(
    ratio: float, want: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    load_bench().report(synthetic(ratio), 20)
    got = verdicts(capsys.readouterr().out)
    assert {case: verdict for case, (_, verdict) in got.items()} == want
    assert all(r == pytest.approx(ratio, abs=0.01) for r, _ in got.values())


def test_a_ratio_is_the_median_of_the_repeats_pairs() -> None:
    bench = load_bench()
    assert bench.paired([2.0, 3.0, 1.0], [1.0, 1.0, 1.0]) == 2.0  # pairs 2, 3, 1
    # The machine slows tenfold after the first baseline run: the pairs still read 2, 0.2, 2
    # (median 2), where the ratio of the medians would compare a quick DAG run with a slow
    # baseline run (2 / 10).
    dag, base = [2.0, 2.0, 20.0], [1.0, 10.0, 10.0]
    assert bench.paired(dag, base) == 2.0
    assert statistics.median(dag) / statistics.median(base) == pytest.approx(0.2)
    with pytest.raises(ValueError):
        bench.paired([1.0], [1.0, 2.0])


async def measure_with(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> dict[str, tuple[float, str]]:
    bench = load_bench()
    m = await bench.measure(db_url, tiny())
    bench.report(m, 4)
    out = capsys.readouterr().out
    assert "(comparison)" in out and "of medians instead" in out
    return verdicts(out)


async def test_the_shell_target_catches_slow_shell_steps(
    db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_command = work.run_command  # type: ignore[attr-defined]  # work imports it from shell

    async def slow(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.1)  # some eighty bare steps' time, on every DAG step
        return await run_command(*args, **kwargs)

    monkeypatch.setattr(work, "run_command", slow)
    got = await measure_with(db_url, capsys)
    assert got["shell"][1] == "OVER", got


async def test_the_chain_and_fanout_targets_catch_a_slow_interpreter(
    db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    execute_step = interpreter.execute_step

    async def slow(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.25)  # the fan-out's three steps sleep at once: 0.25 s a run
        return await execute_step(*args, **kwargs)

    monkeypatch.setattr(interpreter, "execute_step", slow)
    got = await measure_with(db_url, capsys)
    assert got["chain"][1] == "OVER" and got["fanout"][1] == "OVER", got
