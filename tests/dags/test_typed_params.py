"""Dagu v2's rich parameter entries at run time: a value the run is given, or the default, is
checked against the declared type and constraints before any step runs (a bad one fails the
run naming the parameter); `eval` computes the default when the run is not given a value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tether.runtime.registry import App

from .conftest import Start
from .test_run import node_results

pytestmark = pytest.mark.postgres

TYPED = """\
name: typed
params:
  - name: count
    type: integer
    default: 2
    minimum: 1
    maximum: 5
  - name: mode
    enum: [fast, slow]
    default: fast
  - name: day
    eval: "$(printf 2026-12-02)"
  - name: fallback
    eval: "`no_such_command_for_tether_tests`"
    default: fb
  - name: derived
    eval: "${params.mode}-x"
  - name: token
    required: true
steps:
  - name: show
    command: printf '%s|' "$count" "$mode" "$day" "$fallback" "$derived" "$token"
"""

CASES: list[tuple[dict[str, str], str]] = [
    ({"token": "t"}, "2|fast|2026-12-02|fb|fast-x|t|"),
    ({"token": "t", "count": "4", "mode": "slow"}, "4|slow|2026-12-02|fb|slow-x|t|"),
    ({}, "parameter 'token' is required"),
    ({"token": "t", "count": "9"}, "parameter 'count' must be at most 5"),
    ({"token": "t", "count": "x"}, "parameter 'count' 'x' is not an integer"),
    ({"token": "t", "mode": "medium"}, "parameter 'mode' must be one of ['fast', 'slow']"),
]


async def test_typed_params_are_checked_and_evaluated(start: Start, tmp_path: Path) -> None:
    app = App()
    app.dag(TYPED)
    mark = tmp_path / "ran"
    given_day = f"$(touch {mark})"
    async with start(app) as rt:
        outcomes: list[tuple[str, Any]] = []
        for params, _ in [*CASES, ({"token": "t", "day": given_day}, "")]:
            run = (await rt.ops.start("typed", {"params": params})).execution.id
            row = (await rt.ops.wait_for_end(run, timeout=20)).current
            shown = node_results(await rt.ops.steps(run)).get("show", {}).get("stdout")
            outcomes.append((row.status, shown if row.status == "completed" else row.error))
    for (params, want), (status, got) in zip(CASES, outcomes, strict=False):
        if want.startswith("parameter"):
            assert status == "failed" and want in str(got), (params, got)
        else:
            assert (status, got) == ("completed", want), params
    # A value the run is given replaces the `eval`, which does not run; nor does the value.
    assert outcomes[-1] == ("completed", f"2|fast|{given_day}|fb|fast-x|t|")
    assert not mark.exists()
