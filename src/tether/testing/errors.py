"""What a WorkflowEnvironment raises when a run does not do what the test waited for.

Exception
 ├── RunFailed      `result()`: the run ended, but not completed
 └── RunEnded       a wait for input: the run ended before the wait opened
TimeoutError
 └── WaitTimedOut   a wait ran out of wall-clock time; the message says where the run stands
"""

from __future__ import annotations

from typing import Any


class RunFailed(Exception):
    """The run ended without completing: `status` is how it ended (failed, timed_out,
    cancelled, terminated), `error` the error the runtime recorded (a dict: `kind`, `type`,
    `message`, … as `tether runs show` prints it)."""

    def __init__(self, run_id: str, status: str, error: Any) -> None:
        message = error.get("message") if isinstance(error, dict) else None
        super().__init__(f"run {run_id} ended {status}" + (f": {message}" if message else ""))
        self.run_id = run_id
        self.status = status
        self.error = error


class RunEnded(Exception):
    """The run ended (`status`) before it asked for the input the test waited to give."""

    def __init__(self, run_id: str, status: str, waited_for: str) -> None:
        super().__init__(f"run {run_id} ended {status} before {waited_for}")
        self.run_id = run_id
        self.status = status


class WaitTimedOut(TimeoutError):
    """A wait of the environment ran out of (wall-clock) time; the message says what it waited
    for and where the run stood."""
