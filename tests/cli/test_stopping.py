"""How a server stops on signals (cli/stopping.py), in-process: the first signal asks once and
says what is waited for; a second stops at once, after letting the database go. Our choice."""

from __future__ import annotations

import signal

import pytest

from tether.cli.stopping import Stopping, first_line, last_line


class Exited(Exception):
    """What the fake `exit_now` raises, so the test goes on after "exiting"."""


def exit_now(code: int) -> None:
    raise Exited(code)


def stopping(in_flight: int, calls: list[str], *, stop_fails: bool = False) -> Stopping:
    def stop_now() -> None:
        calls.append("database stopped")
        if stop_fails:
            raise RuntimeError("pg_ctl failed")

    return Stopping(
        lambda: calls.append("asked to stop"),
        lambda: in_flight,
        grace_s=10,
        lease_s=30,
        stop_now=stop_now,
        exit_now=exit_now,
    )


def test_the_first_ctrl_c_asks_to_stop_and_says_what_it_waits_for(
    capfd: pytest.CaptureFixture[str],
) -> None:
    calls: list[str] = []
    s = stopping(1, calls)
    s.handle(signal.SIGINT)
    assert calls == ["asked to stop"]
    assert capfd.readouterr().err == (
        "tether: stopping: finishing 1 run in flight, up to 10 s; Ctrl-C again to stop now\n"
    )
    assert s.exit_code == 130


def test_a_second_signal_lets_the_database_go_and_exits_at_once(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Asked once only; the second signal stops the database and exits with the first
    signal's code (SIGTERM: 143), saying what becomes of the runs in flight."""
    calls: list[str] = []
    s = stopping(2, calls)
    s.handle(signal.SIGTERM)
    with pytest.raises(Exited) as exited:
        s.handle(signal.SIGINT)
    assert exited.value.args == (143,)
    assert calls == ["asked to stop", "database stopped"]
    assert capfd.readouterr().err.splitlines()[-1] == (
        "tether: stopped now; the 2 runs in flight resume on the next server once their "
        "leases expire (within 30 s), from the last recorded step"
    )


def test_a_database_that_fails_to_stop_does_not_keep_the_process() -> None:
    calls: list[str] = []
    s = stopping(0, calls, stop_fails=True)
    s.handle(signal.SIGINT)
    with pytest.raises(Exited):
        s.handle(signal.SIGINT)
    assert calls == ["asked to stop", "database stopped"]


def test_with_nothing_in_flight_the_lines_say_so() -> None:
    assert first_line(0, 10) == "tether: stopping (no run in flight); Ctrl-C again to stop now"
    assert last_line(0, 30) == "tether: stopped now"
    assert last_line(1, 30).startswith("tether: stopped now; the run in flight resumes")


def test_the_handlers_are_put_back_after_the_block() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    s = stopping(0, [])
    with s.installed():
        assert signal.getsignal(signal.SIGINT) == s.handle
        assert signal.getsignal(signal.SIGTERM) == s.handle
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert s.exit_code == 0  # no signal came
