"""A caller's data never reaches a shell as text it parses: a value a run is started with (and
what is made from it: an `env` entry, a step's output, a task's answer), and the text of an
inline spec sent without TETHER_INLINE_SHELL (Tether's choice, and Dagu v2's: only text
written in the DAG runs). Text written in a stored DAG still runs: a parameter default's
backtick command, a comparison's `$(…)`, a `command`, each reading the values its references
name from its environment. Every test here runs twice: with the
system's `sh`, and where `sh` is bash (`bash_as_sh`), which runs commands inside `${X@P}`,
`${A:N}` and arithmetic subscripts (`a[$(…)]`) that a POSIX shell reads as plain text."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tether.runtime.dag.catalog import inline_key
from tether.runtime.dag.shell import argv_for, run_command
from tether.runtime.dag.status import dag_status
from tether.runtime.registry import App
from tether.specs.dag.substitute import bind_references

from .conftest import Start
from .test_gates import parked_on
from .test_run import node_results

pytestmark = pytest.mark.postgres


@pytest.fixture(params=["system sh", "bash as sh"], autouse=True)
def shell_flavour(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test once per flavour of `sh` (a step's default shell too: SHELL is unset); inline
    specs never get TETHER_INLINE_SHELL here."""
    monkeypatch.delenv("TETHER_INLINE_SHELL", raising=False)
    monkeypatch.delenv("SHELL", raising=False)
    if request.param == "bash as sh":
        request.getfixturevalue("bash_as_sh")
    return str(request.param)


def payloads(marks: Path) -> list[str]:
    """Values that run `touch` in `marks` if a shell parses them: POSIX forms, and the forms
    only bash runs (a prompt expansion, an arithmetic subscript)."""
    return [
        f"x; touch {marks}/semicolon",
        f"$(touch {marks}/dollar)",
        f"`touch {marks}/backtick`",
        "${X@P}",  # X (the DAG's env) holds a command: bash runs it when expanding a prompt
        f"a[$(touch {marks}/subscript)]",
        f"$((a[$(touch {marks}/arithmetic)]))",
    ]


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


WRITTEN_COMMANDS = """\
name: written
working_dir: {marks}
params:
  - name: A
    default: plain
  - name: QUOTED
    eval: $(printf '%s' "${A}")
  - name: BARE
    eval: $(printf '%s' ${A} $A)
env:
  - X: "$(touch {marks}/prompt)"
  - TICK_QUOTED: "`printf '%s' \\"${A}\\"`"
  - TICK_BARE: "`printf '%s' ${A} $1`"
steps:
  - name: compared
    preconditions:
      - condition: "$(printf '%s' \\"${A}\\")|`printf '%s' \\"$A\\"`|${A}|$A"
        expected: "${A}|${A}|${A}|${A}"
      - condition: "$(printf '%s' ${A} $A ${params.A} ${1})"
        expected: "re:."
    command: printf '%s|%s|%s' "$QUOTED" "$TICK_QUOTED" "$A"
"""


async def test_a_callers_values_inside_written_commands_are_never_parsed(
    start: Start, tmp_path: Path
) -> None:
    """A reference inside a command written in the DAG (a comparison's `$(…)`, a parameter's
    `eval`, a backtick command of `env`) hands the command its value through the shell's
    environment, never as text it parses: quoted, the value comes out as written."""
    marks = tmp_path / "marks"
    marks.mkdir()
    app = App()
    app.dag(WRITTEN_COMMANDS.replace("{marks}", str(marks)))
    outcomes = []
    async with start(app) as rt:
        for value in payloads(marks):
            run = (await rt.ops.start("written", {"params": {"A": value}})).execution.id
            row = (await rt.ops.wait_for_end(run, timeout=20)).current
            compared = node_results(await rt.ops.steps(run)).get("compared", {})
            outcomes.append((row.status, compared.get("status"), compared.get("stdout")))
    assert sorted(p.name for p in marks.iterdir()) == [], "a caller's value ran as a command"
    assert outcomes == [("completed", "succeeded", f"{v}|{v}|{v}") for v in payloads(marks)]


INLINE_COMPARISON = """\
name: compares
env:
  - X: "$(touch {marks}/prompt)"
  - N: "a[$(touch {marks}/subscript)]"
  - A: abc
steps:
  - name: checked
    run: act
    with: {{value: "{text}"}}
    preconditions:
      - condition: "{text}"
        expected: "{text}"
"""
BASH_ONLY = [
    "${X@P}",  # a prompt expansion runs X's command substitution
    "${A:N}",  # a substring offset is arithmetic: N's subscript runs its command
    "${A[N]}",  # so is an index
    "${!N}",  # N's value as a variable name: its subscript runs
    "$((N))",  # N's value as an arithmetic expression
    "$[N]",  # the same, bash's older spelling
]


def acting_app() -> tuple[App, list[str]]:
    """An App whose action `act` records the `value` it is called with."""
    app = App()
    got: list[str] = []

    @app.action("act")
    def act(value: str) -> None:
        got.append(value)

    return app, got


@pytest.mark.parametrize("text", BASH_ONLY)
async def test_an_inline_specs_comparison_is_expanded_without_a_shell(
    start: Start, tmp_path: Path, text: str
) -> None:
    """An inline spec may not run shell text without TETHER_INLINE_SHELL, and its comparison
    starts no shell: the `$` forms that bash expands and Tether does not (`${X@P}`, `$((N))`
    …) stay as written, as Dagu v2 keeps them, so the condition equals its `expected`."""
    marks = tmp_path / "marks"
    marks.mkdir()
    spec = INLINE_COMPARISON.format(marks=marks, text=text)
    app, got = acting_app()
    app.inline_dag(spec)
    async with start(app) as rt:
        run = (await rt.ops.start("compares", {"inline": inline_key(spec)})).execution.id
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
    assert sorted(p.name for p in marks.iterdir()) == [], "an inline spec's text ran"
    assert (row.status, got) == ("completed", [text]), row.error


INLINE_EVAL = """\
name: evaluates
env:
  - X: "$(touch {marks}/prompt)"
  - N: "a[$(touch {marks}/subscript)]"
params:
  - name: MODE
    default: fast
  - name: DERIVED
    eval: "${{params.MODE}}-$MODE-{text}"
steps:
  - name: checked
    run: act
    with: {{value: "${{DERIVED}}"}}
  - id: asked
    action: human.task
    depends: checked
    with:
      prompt: "{text} ${{DERIVED}}"
"""


async def test_an_inline_specs_eval_without_commands_is_expanded_without_a_shell(
    start: Start, tmp_path: Path
) -> None:
    """A parameter `eval` that holds no command substitution needs no shell, so an inline
    spec may have one: its references are put in, every other `$` form stays as written."""
    marks = tmp_path / "marks"
    marks.mkdir()
    text = "|".join(BASH_ONLY)
    spec = INLINE_EVAL.format(marks=marks, text=text)
    app, got = acting_app()
    app.inline_dag(spec)
    async with start(app) as rt:
        run = (await rt.ops.start("evaluates", {"inline": inline_key(spec)})).execution.id
        task = await parked_on(rt, run, "human_task", "asked")
    assert sorted(p.name for p in marks.iterdir()) == [], "an inline spec's text ran"
    assert got == [f"fast-fast-{text}"]
    assert task["prompt"] == f"{text} fast-fast-{text}"


async def test_the_shell_fixture_runs_bash_where_the_runtime_runs_sh(
    start: Start, shell_flavour: str
) -> None:
    """The runtime's `sh` (a step's default shell, a written command substitution) is the `sh`
    on PATH: bash under `bash_as_sh`, so the tests above do exercise bash there."""
    app = App()
    app.dag(
        """\
name: which
params:
  - name: EVALUATED
    eval: $(printf '%s' "${BASH_VERSION:+bash}")
steps:
  - name: step
    preconditions:
      - condition: $(printf '%s' "${BASH_VERSION:+bash}")
        expected: "${EVALUATED}"
    command: printf '%s|%s' "${BASH_VERSION:+bash}" "$EVALUATED"
"""
    )
    async with start(app) as rt:
        run = (await rt.ops.start("which", {})).execution.id
        await rt.ops.wait_for_end(run, timeout=20)
        step = node_results(await rt.ops.steps(run))["step"]
    probe = await run_command(argv_for('printf %s "${BASH_VERSION:+bash}"', None), env=os.environ)
    sh_is = probe.stdout  # "bash", or "" for another shell
    if shell_flavour == "bash as sh":
        assert sh_is == "bash"
    assert (step["status"], step["stdout"]) == ("succeeded", f"{sh_is}|{sh_is}")


def shell_payloads(marks: Path) -> list[str]:
    """`payloads`, and values that end the quoted string or the line they are pasted into."""
    return [
        *payloads(marks),
        f"x' ; touch {marks}/single-quote ; '",
        f'x" ; touch {marks}/double-quote ; "',
        f"x\ntouch {marks}/newline",
    ]


def words(value: str) -> str:
    """What `printf '<%s>' ${V}` prints for V's value: one `<…>` per word (split on blanks and
    newlines, as a shell splits an unquoted expansion; no payload here globs)."""
    return "".join(f"<{word}>" for word in value.split())


STEP_TEXT = """\
name: steps
type: graph
working_dir: {cwd}
params:
  - name: A
    default: plain
env:
  - X: "$(touch {marks}/prompt)"
  - FROM_A: "${A}-env"
steps:
  - name: param
    command: printf '<%s>' "${A}" "${params.A}" "$1" ${A} '${A}'
  - name: derived
    command: printf '<%s>' "${FROM_A}" ${FROM_A}
  - name: produce
    command: printf '%s' "$A"
    output: OUT
  - name: consume
    depends: produce
    command: printf '<%s>' "${OUT}" ${OUT}
  - name: script
    script: |
      printf '<%s>' "${A}"
      cat <<EOF
      ${A}
      EOF
  - name: checked
    preconditions:
      - command: test "${A}" = "$A"
    command: echo ran
"""


async def test_a_callers_values_in_commands_and_scripts_are_read_not_parsed(
    start: Start, tmp_path: Path
) -> None:
    """A reference in a `command`, a shell `script` or a command precondition is read by the
    shell from its environment (Tether's choice: Dagu pastes the value), whether it holds a
    parameter, an `env` entry made from one, or an upstream step's output: the value comes
    out as written (split into words where unquoted), and nothing in it runs. Between single
    quotes `${A}` stays as written, as Dagu leaves it."""
    marks, cwd = tmp_path / "marks", tmp_path / "cwd"
    marks.mkdir()
    cwd.mkdir()
    app = App()
    app.dag(STEP_TEXT.replace("{marks}", str(marks)).replace("{cwd}", str(cwd)))
    got, expected = [], []
    async with start(app) as rt:
        for value in shell_payloads(marks):
            run = (await rt.ops.start("steps", {"params": {"A": value}})).execution.id
            row = (await rt.ops.wait_for_end(run, timeout=20)).current
            results = node_results(await rt.ops.steps(run))
            got.append(
                (row.status, {k: (v["status"], v.get("stdout")) for k, v in results.items()})
            )
            out = value.strip()  # a step's output is its stdout, trimmed
            expected.append(
                (
                    "completed",
                    {
                        "param": ("succeeded", f"<{value}>" * 3 + words(value) + "<${A}>"),
                        "derived": ("succeeded", f"<{value}-env>" + words(f"{value}-env")),
                        "produce": ("succeeded", value),
                        "consume": ("succeeded", f"<{out}>" + words(out)),
                        "script": ("succeeded", f"<{value}>{value}\n"),
                        "checked": ("succeeded", "ran\n"),
                    },
                )
            )
    assert sorted(p.name for p in marks.iterdir()) == [], "a caller's value ran as a command"
    assert got == expected


ANSWERED = """\
name: answered
working_dir: {cwd}
steps:
  - id: ask
    action: human.task
    with:
      prompt: Say something
      form:
        type: object
        required: [note]
        properties:
          note: {type: string}
  - name: use
    depends: ask
    command: printf '<%s>' "${steps.ask.outputs.note}" '${steps.ask.outputs.note}'
  - name: again
    depends: use
    command: printf '<%s>' ${steps.ask.outputs.note}
"""


async def test_an_answer_put_into_a_command_is_read_not_parsed(
    start: Start, tmp_path: Path
) -> None:
    """A human task's answer (`${steps.ID.outputs.F}`) reaches a downstream command through
    a variable of the shell's own: between double quotes, and between single quotes (where
    Dagu puts the value in), it comes out as written, and nothing in it runs."""
    marks, cwd = tmp_path / "marks", tmp_path / "cwd"
    marks.mkdir()
    cwd.mkdir()
    app = App()
    app.dag(ANSWERED.replace("{cwd}", str(cwd)))
    got = []
    async with start(app) as rt:
        for value in shell_payloads(marks):
            run = (await rt.ops.start("answered", {})).execution.id
            task = await parked_on(rt, run, "human_task", "ask")
            await rt.ops.answer(run, task["key"], {"decision": "complete", "note": value})
            row = (await rt.ops.wait_for_end(run, timeout=20)).current
            results = node_results(await rt.ops.steps(run))
            outs = [results.get(name, {}).get("stdout") for name in ("use", "again")]
            got.append((row.status, *outs))
    assert sorted(p.name for p in marks.iterdir()) == [], "an answer ran as a command"
    assert got == [("completed", f"<{v}>" * 2, words(v)) for v in shell_payloads(marks)]


SHELL_NAMED = """\
name: {name}
params:
  - name: {param}
    default: sh
{shell}
steps:
  - name: step
    command: echo ran
"""


@pytest.mark.parametrize(
    ("param", "shell"), [("SH", "shell: ${params.SH}"), ("SHELL", "")], ids=["dag shell", "SHELL"]
)
async def test_a_callers_value_naming_the_shell_adds_no_arguments(
    start: Start, tmp_path: Path, param: str, shell: str
) -> None:
    """A value put into the DAG's `shell` (`shell: ${params.SH}`), or the run's `$SHELL` a
    parameter sets, is one word of the shell's command line: `sh -c '…'` names a program
    that is not there, so the step fails and nothing runs (Tether's choice)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    app = App()
    app.dag(SHELL_NAMED.format(name="named", param=param, shell=shell))
    async with start(app) as rt:
        default = (await rt.ops.start("named", {})).execution.id
        await rt.ops.wait_for_end(default, timeout=20)
        ran = node_results(await rt.ops.steps(default))
        value = f"sh -c 'touch {marks}/shell'"
        run = (await rt.ops.start("named", {"params": {param: value}})).execution.id
        row = (await rt.ops.wait_for_end(run, timeout=20)).current
        step = node_results(await rt.ops.steps(run))["step"]
    assert sorted(p.name for p in marks.iterdir()) == [], "a caller's value ran as a command"
    assert ran["step"]["stdout"] == "ran\n"  # the default names the shell
    assert (row.status, step["status"]) == ("failed", "failed")
    assert "cannot start the command" in step["error"]


def quoting_forms(value: str) -> list[tuple[str, str]]:
    """Shell text in each quoting form, and what the shell prints when `${J.k}` reads
    `value` (`$A`'s and `$1`'s are the same value)."""
    return [
        ('printf \'<%s>\' "${J.k}" "${A}" "$1"', f"<{value}>" * 3),
        ("printf '<%s>' 'a ${J.k} b' '${A}' '$1'", f"<a {value} b><${{A}}><$1>"),
        ('printf \'<%s>\' "$(printf %s "${J.k}")"', f"<{value}>"),
        ('printf \'<%s>\' "`printf %s \\"\\${J.k}\\"`"', f"<{value}>"),
        ("printf '<%s>' ${Z:-\"${J.k}\"} \"${Z:-'${A}'}\"", f"<{value}><'{value}'>"),
        ("cat <<E\n${J.k}\nE", f"{value}\n"),
        ("cat <<'E'\n${J.k}\nE", "${J.k}\n"),
        ("printf '<%s>' \\${J.k} # ${J.k}", "<${J.k}>"),
    ]


async def test_each_quoting_form_reads_a_reference_as_the_shell_reads_its_text(
    tmp_path: Path,
) -> None:
    """`bind_references` reads quoting as the shell does: where the shell expands, a
    reference reads the value (whatever it holds); where it does not, the reference prints
    as written, but for one only Tether reads between single quotes, which reads the value
    (as Dagu puts it in there)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    value = f'it\'s "x" $(touch {marks}/ran) `touch {marks}/ran` ${{X@P}}\nend'
    scope = {"A": value, "J": json.dumps({"k": value}), "X": f"$(touch {marks}/prompt)"}
    got, expected = [], []
    for text, prints in quoting_forms(value):
        bound_text, bound = bind_references(text, scope, positional=[value])
        env = {"PATH": os.environ["PATH"], **scope, **bound}
        res = await run_command(argv_for(bound_text, None), env=env)
        got.append((res.exit_code, res.stdout))
        expected.append((0, prints))
    assert sorted(p.name for p in marks.iterdir()) == [], "a value ran as a command"
    assert got == expected


PROGRAM = """\
name: program
params:
  - name: A
    default: plain
steps:
  - name: python
    command: PYTHON
    script: |
      import os
      print("${A}", os.environ["A"], sep="|")
"""


async def test_a_script_for_another_interpreter_gets_values_put_into_its_text(
    start: Start,
) -> None:
    """A script that a program other than a shell runs (`command: python3`, a shebang's)
    has its references replaced by their values, as in Dagu: it is the DAG author's program,
    which reads a caller's value from its environment (`os.environ`) instead (our choice)."""
    app = App()
    app.dag(PROGRAM.replace("PYTHON", sys.executable))
    async with start(app) as rt:
        run = (await rt.ops.start("program", {"params": {"A": "given"}})).execution.id
        await rt.ops.wait_for_end(run, timeout=20)
        step = node_results(await rt.ops.steps(run))["python"]
    assert (step["status"], step["stdout"]) == ("succeeded", "given|given\n")
