"""The runtime's Python clock and step probes: one seam each, installed for a block, one at a
time per process, and read by the code that decides time (a run's deadline here)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tether.runtime import clock, probes
from tether.runtime.registry import App
from tether.runtime.skipping import SkippingClock

FIXED = datetime(2030, 1, 1, tzinfo=UTC)


def test_an_installed_clock_is_the_runtimes_time_for_the_block_only() -> None:
    """clock.now() reads the installed clock inside the block and the system's after it."""
    with clock.installed(lambda: FIXED):
        assert clock.now() == FIXED
    assert abs(clock.now() - clock.system()) < timedelta(seconds=1)


def test_a_second_clock_is_refused_while_one_is_installed() -> None:
    """Two clocks would fight over one process's time: the second raises, the first stays."""
    with clock.installed(lambda: FIXED):
        with pytest.raises(RuntimeError), clock.installed(clock.system):
            pass
        assert clock.now() == FIXED


def test_a_run_deadline_is_computed_on_the_runtimes_clock() -> None:
    """A workflow's timeout counts from clock.now(), so a skipping clock moves deadlines."""
    app = App()

    @app.workflow(timeout=timedelta(hours=1))
    async def bounded(ctx: object) -> None:
        return None

    with clock.installed(lambda: FIXED):
        assert app.get("bounded").deadline() == FIXED + timedelta(hours=1)


def test_a_skipping_clock_runs_ahead_of_the_system_clock_by_what_it_skipped() -> None:
    """SkippingClock() is the system clock until it skips; `ahead` is what it skipped."""
    skipping = SkippingClock()
    assert abs(skipping() - clock.system()) < timedelta(seconds=1)
    skipping.ahead = timedelta(days=2)
    assert abs(skipping() - clock.system() - timedelta(days=2)) < timedelta(seconds=1)


async def test_a_probe_is_installed_for_the_block_and_one_at_a_time() -> None:
    """probes.current() is the installed probe inside the block, None outside; a second
    install raises."""

    async def probe(point: probes.StepPoint) -> None:
        return None

    assert probes.current() is None
    with probes.installed(probe):
        assert probes.current() is probe
        with pytest.raises(RuntimeError), probes.installed(probe):
            pass
    assert probes.current() is None
