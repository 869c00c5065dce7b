"""The DAG command handlers (`tether dags …`, `tether runs approve|…`), called directly."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tests.apps import answering
from tether.cli import dags as dag_cli
from tether.cli.parser import build_parser
from tether.runtime import errors
from tether.runtime.registry import App

from .conftest import Start
from .test_gates import gated_app, parked_on

pytestmark = pytest.mark.postgres


def test_parsers_accept_the_documented_commands() -> None:
    """`dags list|show|validate|start` and `runs approve|reject|push-back|complete` parse."""
    parser = build_parser()
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


async def test_a_decisions_key_value_inputs_are_read_as_their_fields_types(start: Start) -> None:
    """`runs complete RUN STEP count=3 …`: each VALUE is read as its form field's type (it
    was always a string, so an integer field could only be filled with --json-inputs); text
    that cannot be its field's type is refused naming the field, and nothing is answered."""
    async with start(answering.app) as rt:
        run = (await rt.ops.start("form", {})).execution.id
        await parked_on(rt, run, "human_task", "fill")
        pairs = ["title=007", "count=three", "ratio=0.5", "ok=true"]
        ns = argparse.Namespace(
            id=run, step="fill", action="complete", inputs=pairs, json_inputs=None, reason=None
        )
        with pytest.raises(errors.AnswerRejected) as refused:
            await dag_cli.run_decision(ns, rt.ops)
        assert [e.split(":")[0] for e in refused.value.errors] == ["count"]
        ns.inputs = ["title=007", "count=3", "ratio=0.5", "ok=true"]
        assert (await dag_cli.run_decision(ns, rt.ops))["status"] == "accepted"
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert row.output == {"values": {"title": "007", "count": 3, "ratio": 0.5, "ok": True}}


def test_the_dags_commands_run_from_the_command_line(tmp_path: Path) -> None:
    """`tether dags validate|list|show` as a person runs them (no database needed): a refused
    file exits 1 naming its field and line; `--dags DIR` (or TETHER_DAGS) is loaded."""
    import os
    import subprocess
    import sys

    import orjson

    (tmp_path / "etl.yaml").write_text(
        "steps:\n  - name: a\n    command: 'true'\n  - name: b\n    depends: a\n"
        "    command: 'true'\n",
        encoding="utf-8",
    )
    bad = tmp_path / "bad.txt"
    bad.write_text("steps:\n  - name: a\n    stdout: /tmp/x\n    command: 'true'\n")

    def tether(*args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "TETHER_DAGS"}
        return subprocess.run(
            [sys.executable, "-m", "tether", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    refused = tether("dags", "validate", str(bad), "--json")
    assert refused.returncode == 1, refused.stderr
    body = orjson.loads(refused.stdout)
    assert (body["ok"], body["field"], body["line"]) == (False, "stdout", 3)
    listed = tether("--json", "dags", "list", "--dags", str(tmp_path))
    assert listed.returncode == 0, listed.stderr
    assert [d["name"] for d in orjson.loads(listed.stdout)] == ["etl"]
    shown = tether("dags", "show", "etl", "--dags", str(tmp_path))
    assert orjson.loads(shown.stdout)["steps"] == [
        {"name": "a", "depends": []},
        {"name": "b", "depends": ["a"]},
    ]
