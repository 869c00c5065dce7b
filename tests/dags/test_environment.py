"""What a DAG run sees of the server's environment (our choice; Dagu also filters what it
passes on): a stored DAG reads the variables the operator passes through
(TETHER_DAG_ENV_PASSTHROUGH), an inline spec none of them, and no DAG a TETHER_* variable."""

from __future__ import annotations

import os

import pytest

from tether.runtime.dag.catalog import inline_key
from tether.runtime.dag.environment import DEFAULT_PASSTHROUGH, passthrough, run_environment
from tether.runtime.dag.retrying import DagSteps
from tether.runtime.registry import App
from tether.settings import Settings, SettingsError

from .conftest import Start
from .test_gates import parked_on
from .test_run import node_results

pytestmark = pytest.mark.postgres

SECRETS = {"TETHER_TEST_SECRET": "tether-secret-value", "CLOUD_TOKEN": "cloud-secret-value"}
READS = "${TETHER_TEST_SECRET}|${CLOUD_TOKEN}|${DAG_OK}|${HOME}|$CLOUD_TOKEN"


@pytest.fixture(autouse=True)
def server_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's environment holds secrets, one variable the tests pass through, a HOME."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAG_OK", "passed-through")
    monkeypatch.setenv("HOME", os.environ.get("HOME") or "/root")
    monkeypatch.delenv("TETHER_INLINE_SHELL", raising=False)


ASKS = """\
name: {name}
params:
  - name: EVALUATED
    eval: "{reads}"
steps:
  - id: asked
    action: human.task
    with:
      prompt: "{reads}"
  - name: gated
    run: act
    depends: asked
    approval: {{prompt: "{reads} ${{EVALUATED}}"}}
"""


def asking_app(*passed: str) -> App:
    app = App()
    app.action("act")(lambda: None)
    if passed:
        app.pass_dag_environment(passed)
    return app


async def prompts(start: Start, app: App, name: str, inline: str | None = None) -> list[str]:
    """The human task's prompt, then the approval's once the task is answered."""
    async with start(app) as rt:
        run = (await rt.ops.start(name, {"inline": inline})).execution.id
        task = await parked_on(rt, run, "human_task", "asked")
        await rt.ops.answer(run, task["key"], {"decision": "complete"})
        gate = await parked_on(rt, run, "approval", "gated")
    return [task["prompt"], gate["prompt"]]


async def test_an_inline_spec_reads_no_server_variable(start: Start) -> None:
    """An inline spec's prompts (what tasks/get, dagu_read and the console show) and its
    `eval` read no variable of the server's, not even one passed through to stored DAGs."""
    spec = ASKS.format(name="inline", reads=READS)
    app = asking_app("PATH", "HOME", "DAG_OK", "CLOUD_TOKEN")
    app.inline_dag(spec)
    asked = await prompts(start, app, "inline", inline_key(spec))
    evaluated = "||||"  # `eval` reads as a shell would: an unset name is empty
    assert asked == [READS, f"{READS} {evaluated}"]


async def test_a_stored_dag_reads_only_the_variables_passed_through(start: Start) -> None:
    """A stored DAG reads a passed-through variable; a secret, or any TETHER_* variable, is
    not there: a reference to it stays as written (an `eval` reads it as empty)."""
    app = asking_app("PATH", "HOME", "DAG_OK")
    app.dag(ASKS.format(name="stored", reads=READS))
    home = os.environ["HOME"]
    shown = f"${{TETHER_TEST_SECRET}}|${{CLOUD_TOKEN}}|passed-through|{home}|$CLOUD_TOKEN"
    asked = await prompts(start, app, "stored")
    assert asked == [shown, f"{shown} ||passed-through|{home}|"]


STEPS = """\
name: {name}
env:
  - TICKED: "`printf '%s' \\"$CLOUD_TOKEN$TETHER_TEST_SECRET$DAG_OK\\"`"
steps:
  - name: listed
    command: env
  - name: read
    preconditions:
      - condition: "$(printf '%s' \\"$CLOUD_TOKEN$TETHER_TEST_SECRET\\")$CLOUD_TOKEN"
        expected: ""
    command: printf '%s|%s|%s' "$TICKED" "${{HOME}}" "$DAG_OK"
"""


def environment_of(stdout: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


async def test_a_stored_dags_processes_get_the_variables_passed_through(start: Start) -> None:
    """Every process a stored DAG starts (steps, backtick commands, a comparison's commands)
    has the passed-through variables and the DAG's own, none of the server's others."""
    app = App()  # the default list: DAG_OK is not on it
    app.dag(STEPS.format(name="steps"))
    async with start(app) as rt:
        run = (await rt.ops.start("steps", {})).execution.id
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
        results = node_results(await rt.ops.steps(run))
    assert row.status == "completed", row.error
    seen = environment_of(results["listed"]["stdout"])
    assert not [name for name in seen if name.startswith("TETHER_") or name == "CLOUD_TOKEN"]
    assert "DAG_OK" not in seen and seen["HOME"] == os.environ["HOME"]
    assert seen["PATH"] == os.environ["PATH"] and seen["TICKED"] == ""
    assert results["read"]["stdout"] == f"|{os.environ['HOME']}|"


async def test_an_inline_specs_shell_gets_path_alone(
    start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With TETHER_INLINE_SHELL, an inline spec's processes find programs on the server's PATH,
    and get no other variable of the server's; `${PATH}` in its text stays as written."""
    monkeypatch.setenv("TETHER_INLINE_SHELL", "1")
    spec = STEPS.format(name="inline-steps")
    app = App()
    app.inline_dag(spec)
    async with start(app) as rt:
        run = (await rt.ops.start("inline-steps", {"inline": inline_key(spec)})).execution.id
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
        results = node_results(await rt.ops.steps(run))
    assert row.status == "completed", row.error
    seen = environment_of(results["listed"]["stdout"])
    assert seen["PATH"] == os.environ["PATH"] and seen["TICKED"] == ""
    assert not {"HOME", "DAG_OK", "CLOUD_TOKEN", "SHELL"} & set(seen)
    assert not [name for name in seen if name.startswith("TETHER_")]
    assert results["read"]["stdout"] == "||"


RETRIED = """\
name: retried
steps:
  - name: flaky
    run: flaky
    with: {value: "${HOME}|${DAG_OK}"}
"""


async def test_a_retried_inline_run_still_reads_no_server_variable(start: Start) -> None:
    """The run records that its spec came inline; a retry of it, which takes the recorded
    spec, is still an inline run."""
    app = App()
    app.pass_dag_environment(["HOME", "DAG_OK"])
    seen: list[str] = []

    @app.action("flaky")
    def flaky(value: str) -> None:
        seen.append(value)
        if len(seen) == 1:
            raise RuntimeError("first try fails")

    app.inline_dag(RETRIED)
    async with start(app) as rt:
        first = (await rt.ops.start("retried", {"inline": inline_key(RETRIED)})).execution.id
        assert (await rt.ops.wait_for_end(first, timeout=20)).current.status == "failed"
        again = await rt.ops.again(first, plan=DagSteps(), business_id="same")
        row = (await rt.ops.wait_for_end(again.id, timeout=20)).current
    assert row.status == "completed", row.error
    assert seen == ["${HOME}|${DAG_OK}"] * 2


@pytest.mark.parametrize(
    "names",
    [["PATH", "TETHER_DATABASE_URL"], ["tether_encryption_keys"], ["PATH", "NOT-A-NAME"]],
)
def test_the_allow_list_refuses_tether_names_and_non_names(names: list[str]) -> None:
    """A TETHER_* name is refused wherever the list is set (the App, the settings): the
    server's settings never reach a DAG; nor does a name that no variable can have."""
    app = App()
    with pytest.raises(ValueError, match=names[-1]):
        app.pass_dag_environment(names)
    assert app.dag_env_passthrough == frozenset(DEFAULT_PASSTHROUGH)
    with pytest.raises(SettingsError, match="TETHER_DAG_ENV_PASSTHROUGH"):
        Settings.from_env({"TETHER_DAG_ENV_PASSTHROUGH": ",".join(names)})


def test_the_default_allow_list_holds_no_credential() -> None:
    """The settings' default is `DEFAULT_PASSTHROUGH`; a TETHER_* variable is skipped even
    when a list holds one, and an inline spec's processes get PATH from it, nothing else."""
    assert Settings.from_env({}).dag_environment() == frozenset(DEFAULT_PASSTHROUGH)
    assert passthrough([" PATH ", "", "HOME"]) == {"PATH", "HOME"}
    environ = {"PATH": "/bin", "HOME": "/h", "TETHER_X": "secret", "OTHER": "o"}
    listed = frozenset({"PATH", "HOME", "TETHER_X"})
    stored = run_environment(listed, inline=False, environ=environ)
    inline = run_environment(listed, inline=True, environ=environ)
    assert (dict(stored.variables), dict(stored.process)) == ({"PATH": "/bin", "HOME": "/h"}, {})
    assert (dict(inline.variables), dict(inline.process)) == ({}, {"PATH": "/bin"})
    assert run_environment(frozenset({"HOME"}), inline=True, environ=environ).process == {}
