"""Where a DAG's checks and variables apply: the DAG's own `preconditions` (Dagu spec 023),
checked once before the first step (when one does not hold, no step runs, the `exit` handler
does, and the run ends `aborted`); and a step's own `env` (Dagu spec 006)."""

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
params: "READY=no"
preconditions:
  - condition: "${READY}"
    expected: "yes"
  - test -f flag
handler_on:
  exit:
    command: echo bye
steps:
  - name: main
    preconditions:
      - eval: "$(printf on)"
        expected: "on"
    command: echo main
"""


async def test_dag_preconditions_abort_the_run_or_let_it_go(start: Start, tmp_path: Path) -> None:
    (tmp_path / "guarded.yaml").write_text(GUARDED)
    app = App()
    app.dag(tmp_path / "guarded.yaml")
    async with start(app) as rt:
        runs = {}
        for label, params in (
            ("unmet", {}),
            ("no-flag", {"READY": "yes"}),
            ("met", {"READY": "yes"}),
        ):
            if label == "met":
                (tmp_path / "flag").write_text("")  # a command precondition, in the file's dir
            run = (await rt.ops.start("guarded", {"params": params})).execution.id
            row = (await rt.ops.wait_for_end(run, timeout=20)).current
            steps = await rt.ops.steps(run)
            runs[label] = (row, steps, dag_status(row, steps))
    for label in ("unmet", "no-flag"):
        row, steps, detail = runs[label]
        assert row.status == "completed" and detail.status_label == "aborted", label
        assert [s.status_label for s in detail.steps] == ["not_started"], label
        assert "main" not in node_results(steps)
        exit_handler = next(r for r in steps if r.name == "handler:exit")
        assert exit_handler.result["value"]["stdout"] == "bye\n"
    assert runs["unmet"][0].output["reason"] == "precondition not met: ${READY}"
    assert runs["no-flag"][0].output["reason"] == "precondition not met: test -f flag"
    row, steps, detail = runs["met"]
    assert detail.status_label == "succeeded"
    assert node_results(steps)["main"]["stdout"] == "main\n"


STEP_ENV = """\
name: stepenv
params: "TARGET=api"
env:
  - ROOT=root
steps:
  - name: produce
    command: echo made
    output: MADE
  - name: consume
    env:
      - PARAM=${TARGET}
      - ROOT_COPY=${env.ROOT}
      - PREVIOUS=${MADE}
      - EARLIER=sprout
      - LATER=${EARLIER}-grown
      - DAG_RUN_ID=shadowed
    command: printf '%s|' "$PARAM" "$ROOT_COPY" "$PREVIOUS" "$LATER" "$DAG_RUN_ID"
handler_on:
  exit:
    env:
      HANDLER: only-here
    command: printf '%s|%s' "$HANDLER" "${LATER:-unset}"
"""


async def test_a_steps_own_env(start: Start) -> None:
    """A step's `env` (Dagu spec 006): evaluated top to bottom over the params, the DAG's env
    and the upstream outputs; it does not reach other steps; run values stay protected."""
    app = App()
    app.dag(STEP_ENV)
    async with start(app) as rt:
        run = (await rt.ops.start("stepenv", {})).execution.id
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
        steps = await rt.ops.steps(run)
    assert row.status == "completed", row.error
    shown = node_results(steps)["consume"]["stdout"]
    assert shown == f"api|root|made|sprout-grown|{row.business_id}|", shown
    handler = next(r for r in steps if r.name == "handler:exit")
    assert handler.result["value"]["stdout"] == "only-here|unset"
