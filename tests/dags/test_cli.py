"""The DAG command handlers (`tether dags …`, `tether runs approve|…`), called directly."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tether import dag_cli
from tether.runtime import errors
from tether.runtime.registry import App

from .conftest import Start
from .test_gates import gated_app, parked_on

pytestmark = pytest.mark.postgres


def test_parsers_accept_the_documented_commands() -> None:
    """`dags list|show|validate|start` and `runs approve|reject|push-back|complete` parse."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    dag_cli.add_commands(sub)
    runs = sub.add_parser("runs").add_subparsers(dest="action")
    dag_cli.add_run_commands(runs)
    args = parser.parse_args(["dags", "start", "etl", "A", "B=2"])
    assert (args.action, args.name, args.params) == ("start", "etl", ["A", "B=2"])
    args = parser.parse_args(["runs", "push-back", "ex_1", "gate", "NOTE=x", "--reason", "r"])
    assert (args.action, args.step, args.inputs) == ("push-back", "gate", ["NOTE=x"])


def test_validate_names_the_refused_field_and_line(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("steps:\n  - name: a\n    command: 'true'\n", encoding="utf-8")
    bad.write_text("steps:\n  - name: a\n    command: 'true'\n    executor: docker\n", "utf-8")
    assert dag_cli.validate(str(good)) == {"ok": True, "name": "good", "steps": ["a"]}
    refused = dag_cli.validate(str(bad))
    assert (refused["ok"], refused["field"], refused["line"]) == (False, "executor", 4)


def test_list_and_show(tmp_path: Path) -> None:
    (tmp_path / "etl.yaml").write_text(
        "params: A\nlabels: team=data\nsteps:\n  - name: a\n    command: 'true'\n", "utf-8"
    )
    app = App()
    assert dag_cli.prepare_app(app, str(tmp_path)) == {}
    (listed,) = dag_cli.list_dags(app)
    assert (listed["name"], listed["labels"], listed["steps"]) == ("etl", ["team=data"], 1)
    shown = dag_cli.show_dag(app, "etl")
    assert shown["params"] == [{"position": 1, "name": None, "default": "A"}]
    with pytest.raises(errors.WorkflowNotFound):
        dag_cli.show_dag(app, "nope")


async def test_start_and_decide_through_the_answer_path(start: Start, tmp_path: Path) -> None:
    """`dags start` then `runs push-back` and `runs approve` decide the gate via `answer`;
    a step with no open gate is WaitNotOpen; a missing required input is refused."""
    log = tmp_path / "log"
    async with start(gated_app(log)) as rt:
        started = await dag_cli.start_dag(rt.ops, "gated", [])
        run = started["id"]
        await parked_on(rt, run, "approval", "publish")
        with pytest.raises(errors.WaitNotOpen):
            await dag_cli.decide(rt.ops, run, "build", "approve", {})
        with pytest.raises(errors.AnswerRejected):
            await dag_cli.decide(rt.ops, run, "publish", "approve", {})
        ns = argparse.Namespace(
            id=run,
            step="publish",
            action="push-back",
            inputs=["NOTE=again"],
            json_inputs=None,
            reason=None,
        )
        assert (await dag_cli.run_decision(ns, rt.ops))["status"] == "accepted"
        await parked_on(rt, run, "approval", "publish")
        await dag_cli.decide(rt.ops, run, "publish", "approve", {"TICKET": "T"})
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert row.status == "completed", row.error
    assert "build-1-again" in log.read_text().split()
