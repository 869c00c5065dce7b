"""Dagu semantics found by running Dagu's own example DAGs against Tether (each check failed
before its fix): a missing shell fails its step, not the run's machinery; a skipped step's
chain successor reads `skipped`, a failed one's `aborted`; `${VAR.path}` JSON references;
backtick commands in params and env; unnamed string steps run as a chain; outputs are
trimmed of spaces and published by a failed step too; the default shell is `$SHELL -e`
and a script's shebang line chooses its interpreter; a file's steps run in its directory;
Dagu v2's `run: <shell text>` and `${params.NAME}`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.runtime.dag.status import dag_status
from tether.runtime.registry import App

from .conftest import Start
from .test_run import node_results, run_to_end

pytestmark = pytest.mark.postgres

DAGS = {
    "noshell": """
steps:
  - name: zsh
    shell: /nonexistent/zsh
    command: echo hi
  - name: after
    command: echo after
handlerOn:
  failure:
    command: echo handled
""",
    "skipchain": """
steps:
  - command: echo a
  - command: echo b
    preconditions:
      - condition: "${FEATURE}"
        expected: "on"
  - command: echo c
""",
    "jsonref": """
params:
  - ORDER: '{"sku": "kettle", "qty": 3, "bins": ["a7", "c2"]}'
steps:
  - name: route
    script: |
      printf '{"carrier": "%s", "dock": %d}\\n' northline 4
    output: ROUTE
  - name: label
    depends: route
    command: >-
      echo "${ORDER.sku} x${ORDER.qty} from ${ORDER.bins[1]},
      ${ROUTE.carrier} at dock ${ROUTE.dock}"
""",
    "v2run": """
params:
  - MESSAGE: hello
steps:
  - run: echo "${params.MESSAGE} from v2"
    output: SAID
  - run: |
      echo "got ${SAID}"
""",
    "backticks": """
params:
  - SHELF: "`expr 7 + 5`"
env:
  - AISLE: "`printf north`"
  - SPOT: "${AISLE}-${SHELF}"
steps:
  - echo $AISLE $SPOT $SHELF ${SHELF}
""",
    "outputs": """
steps:
  - name: spaced
    command: printf '  42  \\n'
    output: N
  - name: soft
    command: echo partial; exit 3
    output: P
    continueOn: {failure: true}
  - name: use
    command: echo "[$N] got $P"
    depends: [spaced, soft]
""",
    "errexit": """
steps:
  - command: |
      false
      echo after
""",
    "shells": """
type: graph
steps:
  - name: braces
    command: echo {1..3}
  - name: shebang
    script: |
      #!/usr/bin/env python3
      print(6 * 7)
  - name: explicit
    shell: sh
    command: false; echo explicit shells get no -e
""",
    "matching": """
type: graph
steps:
  - name: pre
    command: echo ran
    preconditions:
      - condition: abcdef
        expected: re:^abc
  - name: soft
    command: printf 'x\\nwarn - disk\\n'; exit 1
    continueOn:
      output: ["re:^warn"]
  - name: after
    command: echo after
    depends: soft
""",
    "unnamed": """
steps:
  - command: echo one
    output: X
  - echo got $X
""",
}


async def test_small_dags_run_with_dagus_semantics(
    start: Start, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SHELL", "/bin/bash")  # Dagu's default shell is $SHELL, with -e
    app = App()
    for name, text in DAGS.items():
        app.dag(f"name: {name}\n{text}")
    # A file's steps run in the file's directory; a relative `dir` is taken from there.
    (tmp_path / "sub").mkdir()
    (tmp_path / "data.txt").write_text("beside the DAG\n")
    (tmp_path / "files.yaml").write_text(
        "steps:\n  - cat data.txt\n  - name: sub\n    dir: sub\n    command: basename $PWD\n"
    )
    app.dag(tmp_path / "files.yaml")
    async with start(app) as rt:
        rows = {name: await run_to_end(rt, name) for name in [*DAGS, "files"]}
        steps = {name: await rt.ops.steps(row.id) for name, row in rows.items()}
    details = {name: dag_status(rows[name], steps[name]) for name in rows}
    labels = {n: {s.name: s.status_label for s in d.steps} for n, d in details.items()}
    stdout = {n: {k: v.get("stdout") for k, v in node_results(s).items()} for n, s in steps.items()}

    # A shell that cannot start fails the step (Dagu), the run goes on to its failure handler;
    # the next step of the chain is aborted, "upstream failed" (Dagu's scheduler).
    assert details["noshell"].status_label == "failed"
    assert labels["noshell"] == {"zsh": "failed", "after": "aborted"}
    assert details["noshell"].steps[1].error == "upstream failed"
    assert "cannot start the command" in (details["noshell"].steps[0].error or "")
    handler = next(r for r in steps["noshell"] if r.name == "handler:failure")
    assert handler.result["value"]["stdout"] == "handled\n"

    # A skipped step's chain successor is skipped too, in the read model of the ended run.
    assert labels["skipchain"] == {"cmd_1": "succeeded", "cmd_2": "skipped", "cmd_3": "skipped"}
    assert details["skipchain"].status_label == "succeeded"

    assert stdout["jsonref"]["label"] == "kettle x3 from c2, northline at dock 4\n"
    assert stdout["backticks"]["cmd_1"] == "north north-12 12 12\n"
    assert stdout["v2run"] == {"cmd_1": "hello from v2\n", "cmd_2": "got hello from v2\n"}
    # The default shell is $SHELL -e: a failing line fails the step; bash-isms work; a
    # script's shebang picks its interpreter; a step's own `shell` gets no -e.
    assert labels["errexit"] == {"cmd_1": "failed"}
    assert stdout["shells"] == {
        "braces": "1 2 3\n",
        "shebang": "42\n",
        "explicit": "explicit shells get no -e\n",
    }

    assert stdout["files"] == {"cmd_1": "beside the DAG\n", "sub": "sub\n"}

    # A precondition's `re:` is not anchored; continueOn `output` regexes match line by line.
    assert labels["matching"] == {"pre": "succeeded", "soft": "failed", "after": "succeeded"}
    assert details["matching"].status_label == "partially_succeeded"

    # Dagu publishes TrimSpace'd stdout, and a failed command's output too.
    assert stdout["outputs"]["use"] == "[42] got partial\n"
    assert stdout["unnamed"] == {"cmd_1": "one\n", "cmd_2": "got one\n"}


V2_PARENT = """\
working_dir: work
params:
  - name: SH
    default: sh
  - name: HERE
    eval: $(basename "$PWD")
shell: ${params.SH}
env:
  - WORD: hey
steps:
  - id: envref
    run: |
      WORD=shell
      echo "$WORD ${env.WORD}"
  - id: where
    run: basename "$PWD"
  - id: nested
    working_dir: inner
    run: basename "$PWD"
  - id: which
    run: echo "${BASH_VERSION:-not bash}"
  - id: own
    shell: bash
    run: echo "${BASH_VERSION:+bash}"
  - id: errexit
    run: |
      false
      echo not reached
    continue_on:
      failure: true
  - id: child
    action: dag.run
    with:
      dag: v2child
      params: "WHO=tether"
    output: CHILD
  - id: picked
    run: echo "${CHILD.outputs.GREETING}"
  - id: oneword
    run: pwd
  - id: evaluated
    run: echo "$HERE"
"""
V2_CHILD = """\
name: v2child
params: "WHO=nobody"
steps:
  - id: greet
    run: echo "hi ${WHO}"
    output: GREETING
"""


async def test_dagu_v2_root_working_dir_shell_and_dag_run(
    start: Start, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Dagu v2's DAG-level `working_dir` (relative to the file; a step's own is taken from
    it) and `shell` (a step's shell when it names none, with `-e` as the default shell has;
    its `${…}` references put in),
    `action: dag.run` with `with: {dag, params}` (v2's spelling of `call`), and a one-word
    `run:` that names no registered action (`run: pwd`) as a shell command."""
    monkeypatch.setenv("SHELL", "/bin/bash")
    # `work` and `work/inner` do not exist: as Dagu does, a missing working directory is made.
    (tmp_path / "v2parent.yaml").write_text(V2_PARENT)
    app = App()
    app.dag(tmp_path / "v2parent.yaml")
    app.dag(V2_CHILD)
    async with start(app) as rt:
        row = await run_to_end(rt, "v2parent")
        steps = await rt.ops.steps(row.id)
    detail = dag_status(row, steps)
    labels = {s.name: s.status_label for s in detail.steps}
    stdout = {k: v.get("stdout") for k, v in node_results(steps).items()}
    assert labels["errexit"] == "failed" and stdout["errexit"] == "", stdout
    assert {k: v for k, v in labels.items() if k != "errexit"} == dict.fromkeys(
        ("envref", "where", "nested", "which", "own", "child", "picked", "oneword", "evaluated"),
        "succeeded",
    )
    assert stdout["envref"] == "shell hey\n"  # `${env.NAME}`: the DAG's env, not the shell's
    # A one-word `run:` that names no registered action is Dagu's shell command.
    assert stdout["oneword"] == f"{tmp_path / 'work'}\n"
    assert stdout["evaluated"] == "work\n"  # a parameter's `eval` runs in the working dir
    assert stdout["where"] == "work\n" and stdout["nested"] == "inner\n"
    assert stdout["which"] == "not bash\n" and stdout["own"] == "bash\n"
    assert stdout["picked"] == "hi tether\n"
