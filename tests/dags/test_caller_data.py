"""A value a run is started with is data: it never runs as a command, wherever the DAG puts
it (Tether's choice, and Dagu v2's: only text written in the DAG runs). Text written in the
DAG still runs: a parameter default's backtick command, a comparison's `$(…)`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.runtime.dag.status import dag_status
from tether.runtime.registry import App

from .conftest import Start
from .test_run import node_results

pytestmark = pytest.mark.postgres

GUARDED = """\
name: guarded
type: graph
params: "A=plain B=`printf from-file`"
env:
  - FROM_A: "${A}-env"
steps:
  - name: show
    command: printf '%s|%s|%s' "$A" "$FROM_A" "$B"
  - name: compared
    preconditions:
      - condition: "${A}"
        expected: "x"
    command: echo ran
  - name: quoted
    preconditions:
      - condition: "${A} $(printf on)"
        expected: "${A} on"
    command: echo ran
"""


async def test_a_callers_values_never_run(start: Start, tmp_path: Path) -> None:
    marks = [tmp_path / "by-backticks", tmp_path / "by-dollar"]
    value = f"`touch {marks[0]}`$(touch {marks[1]})"
    app = App()
    app.dag(GUARDED)
    async with start(app) as rt:
        run = (await rt.ops.start("guarded", {"params": {"A": value}})).execution.id
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
        steps = await rt.ops.steps(run)
    assert not [m for m in marks if m.exists()], "a caller's value ran as a command"
    labels = {s.name: s.status_label for s in dag_status(row, steps).steps}
    assert labels == {"show": "succeeded", "compared": "skipped", "quoted": "succeeded"}
    # The value reaches the step as written; the file's default command did run.
    assert node_results(steps)["show"]["stdout"] == f"{value}|{value}-env|from-file"
