"""The next step's shell, started one step ahead.

A shell's start (fork, exec, the dynamic loader, the shell's own start-up) takes longer than
a short command itself. A gated shell is started while the previous step's result commits, but
its start-up still runs on after the commit is in. So when a lone step starts, the interpreter
plans the step that would be the next wave alone if this one succeeds (`Launch`: the argv,
environment and working directory it would run with then), and the current step's runner starts
that one too (`Ahead.launch`) at its first pause: while the current shell waits at its gate for
the previous step's commit or, when no write is in flight, while its command runs. It is
behind its gate (`shell.GATE_PREFIX`): it runs nothing until it is given its line, and by its
turn it waits, started, at its `read`.

When the next step's turn comes, its runner takes the waiting shell only if it was started with
exactly the argv, environment and directory the step has now (`Ahead.take`); it then passes
the gate as any gated shell does, once the previous step's result has committed. Any other
shell (the step failed, published a value, was retried, the run parked, ended or was
cancelled) is ended unused (`Ahead.discard`, `shell.abandon`): it reads end of file at its
gate and exits 125 without running anything, and is reaped. A worker killed meanwhile leaves
the same end of file. Only shells that read no startup file under `-c` are started ahead
(`quiet_start`), so a shell that is never used has run nothing of the user's.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tether.runtime.dag.shell import Started, abandon, start_gated

#: Shells that run no startup file for `shell -c` (without BASH_ENV or ENV set); zsh reads
#: ~/.zshenv, ksh may read $ENV.
QUIET_SHELLS: Final = frozenset({"sh", "dash", "ash", "bash"})


def quiet_start(argv0: str, env: Mapping[str, str]) -> bool:
    """Whether a shell started ahead with `-c` would run no file before its gate."""
    if "BASH_ENV" in env or "ENV" in env:
        return False
    return os.path.basename(argv0) in QUIET_SHELLS


@dataclass(frozen=True)
class Launch:
    """How step `step`'s first command starts, behind its gate."""

    step: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str | None


class Ahead:
    """One run's planned launch and the shell started for it (at most one of each)."""

    def __init__(self) -> None:
        self.planned: Launch | None = None
        self._spare: tuple[Launch, Started] | None = None
        self._closed = False
        self.taken = 0  # shells started ahead that ran their step (read by tests)

    def plan(self, launch: Launch | None) -> None:
        """The shell `launch` starts next (None: none)."""
        self.planned = launch

    def keep(self, step: str | None) -> None:
        """The next wave is `step` alone (None: anything else): a shell started ahead for
        another step is ended unused."""
        if self._spare is not None and self._spare[0].step != step:
            self.discard()

    def launch(self) -> None:
        """Start the planned shell at the caller's next pause (`call_soon`): while the
        current step's shell waits at its gate for the previous step's commit or, when no
        write is in flight, while its command runs; never between the two."""
        planned, self.planned = self.planned, None
        if planned is not None:
            asyncio.get_running_loop().call_soon(self._start, planned)

    def _start(self, planned: Launch) -> None:
        """Start `planned`'s shell, ending any other one waiting. A shell that cannot be
        started leaves nothing: the step starts its own when its turn comes (and fails there
        as it would have)."""
        if self._closed:
            return
        self.discard()
        try:
            started = start_gated(list(planned.argv), planned.env, planned.cwd)
        except Exception:  # noqa: BLE001 — the step's own start reports it, in its turn
            return
        self._spare = (planned, started)

    def take(self, argv: list[str], env: Mapping[str, str], cwd: str | None) -> Started | None:
        """The shell started ahead when it was started exactly so; else None (and any shell
        waiting is ended unused)."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        launch, started = spare
        if launch.cwd == cwd and launch.argv == tuple(argv) and launch.env == env:
            self.taken += 1
            return started
        abandon(*started)
        return None

    def discard(self) -> None:
        """End the shell waiting, if any, unused."""
        spare, self._spare = self._spare, None
        if spare is not None:
            abandon(*spare[1])

    def close(self) -> None:
        """The run is done with its steps: end the shell waiting, and start no other."""
        self._closed = True
        self.discard()
