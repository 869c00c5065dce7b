"""Loading DAGs: a directory (bad files reported, others kept), reloads, inline specs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.runtime.dag import catalog
from tether.runtime.dag.catalog import InlineShellRefused, inline_key
from tether.runtime.dag.reloader import DagReloader
from tether.runtime.registry import App
from tether.specs.dag import InvalidValue, Step, UnknownField, load_string

GOOD = "steps:\n  - name: s\n    command: echo {word}\n"


def write(path: Path, text: str, mtime: float) -> None:
    path.write_text(text, encoding="utf-8")
    os.utime(path, (mtime, mtime))


def test_a_bad_file_is_reported_and_the_others_are_kept(tmp_path: Path) -> None:
    """load_dags registers every good file and names the bad one with its problem."""
    write(tmp_path / "one.yaml", GOOD.format(word="1"), 1)
    write(tmp_path / "two.yml", "steps:\n  - name: s\n    command: x\n    signalOnStop: TERM\n", 1)
    app = App()
    problems = app.load_dags(tmp_path)
    assert set(app.dags) == {"one"} and "one" in app.workflows
    assert list(problems) == [str(tmp_path / "two.yml")]
    assert "signalOnStop" in problems[str(tmp_path / "two.yml")]


def test_reloader_replaces_changed_keeps_broken_and_forgets_deleted(tmp_path: Path) -> None:
    """A changed file replaces its DAG; a file broken by an edit keeps the previous DAG; a
    deleted file's DAG is forgotten."""
    app = App()
    reloader = DagReloader(app, tmp_path)
    write(tmp_path / "a.yaml", GOOD.format(word="1"), 1)
    write(tmp_path / "b.yaml", GOOD.format(word="1"), 1)
    assert sorted(reloader.scan().loaded) == ["a", "b"]
    assert reloader.scan().loaded == []  # nothing changed
    write(tmp_path / "a.yaml", GOOD.format(word="2"), 2)
    write(tmp_path / "b.yaml", "steps: [", 2)
    report = reloader.scan()
    assert report.loaded == ["a"] and list(report.problems) == [str(tmp_path / "b.yaml")]
    assert "echo 2" in app.dags["a"].text and "echo 1" in app.dags["b"].text
    (tmp_path / "a.yaml").unlink()
    assert reloader.scan().removed == ["a"]
    assert "a" not in app.workflows and "b" in app.workflows


def test_inline_shell_is_refused_naming_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """An inline spec with shell steps is refused unless TETHER_INLINE_SHELL is set."""
    monkeypatch.delenv("TETHER_INLINE_SHELL", raising=False)
    app = App()
    app.action("act")(lambda: None)  # an inline spec's `run:` must name a registered action
    text = "name: inl\nsteps:\n  - name: ok\n    run: act\n  - name: sh\n    command: id\n"
    with pytest.raises(InlineShellRefused) as caught:
        app.inline_dag(text)
    assert "'sh'" in str(caught.value) and caught.value.line == 5
    assert "inl" not in app.workflows
    monkeypatch.setenv("TETHER_INLINE_SHELL", "1")
    assert app.inline_dag(text).name == "inl"


ACT = "steps:\n  - name: ok\n    run: act\n"
SHELL_OUTSIDE_STEPS = [
    # (spec, the field the refusal names, its line)
    ("name: pre\n" + ACT + "    preconditions:\n      - test -f /etc/hosts\n", "preconditions", 3),
    (
        "name: cmp\n" + ACT + "    preconditions:\n      - condition: '$(id -u)'\n"
        "        expected: '0'\n",
        "preconditions",
        3,
    ),
    ("name: tick\n" + ACT + "    preconditions:\n      - condition: '`id -u`'\n"
     "        expected: '0'\n", "preconditions", 3),
    ("name: env\nenv:\n  - WHO: '`id -un`'\n" + ACT, "env", 2),
    ("name: ev\nparams:\n  - name: WHO\n    eval: $(id -un)\n" + ACT, "params", 2),
    ("name: rp\npreconditions:\n  - test -f /etc/hosts\n" + ACT, "preconditions", 2),
    ("name: par\ndescription: d\nparams: 'WHO=`id -un`'\n" + ACT, "params", 3),
]  # fmt: skip


@pytest.mark.parametrize(("text", "field", "line"), SHELL_OUTSIDE_STEPS)
def test_inline_shell_outside_steps_is_refused_naming_the_field(
    text: str, field: str, line: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shell text an inline spec writes outside `command` / `script` runs a shell too: a
    command precondition, a comparison holding `$(…)` or backticks, backticks in `env` or a
    parameter's default. Each needs TETHER_INLINE_SHELL; a plain comparison does not."""
    monkeypatch.delenv("TETHER_INLINE_SHELL", raising=False)
    app = App()
    app.action("act")(lambda: None)
    with pytest.raises(InlineShellRefused) as caught:
        app.inline_dag(text)
    assert (caught.value.field, caught.value.line) == (field, line), str(caught.value)
    assert not app.dags
    plain = "name: plain\nparams: 'X=$HOME'\n" + ACT + "    preconditions:\n"
    plain += "      - condition: '${X}'\n        expected: on\n"
    assert app.inline_dag(plain).name == "plain"
    monkeypatch.setenv("TETHER_INLINE_SHELL", "1")
    assert app.inline_dag(text).steps


class Unwalked(tuple[Step, ...]):
    """A spec's steps that fail the test when something goes through them."""

    def __iter__(self) -> Iterator[Step]:
        raise AssertionError("the steps were walked")


def test_an_inline_spec_loaded_elsewhere_is_registered_without_walking_its_steps() -> None:
    """Our choice: whether it runs shell, and which functions and remotes it calls, were
    found where it was loaded (for `dagu_execute`, the document worker), so registering it
    on the event loop reads them instead of going through every step."""
    app = App()
    app.action("act")(lambda: None)
    text = "name: inl\n" + ACT + "  - name: two\n    run: act\n"
    spec = load_string(text)
    object.__setattr__(spec, "steps", Unwalked(spec.steps))
    assert app.inline_dag(text, spec=spec) is spec
    assert app.dags["inl"].inline and "inl" in app.workflows


def test_registering_an_inline_spec_hashes_its_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our choice: its content key (SHA-256 of the whole text) is found once per registration."""
    hashed: list[str] = []

    def counted(text: str) -> str:
        hashed.append(text)
        return inline_key(text)

    monkeypatch.setattr(catalog, "inline_key", counted)
    app = App()
    app.action("act")(lambda: None)
    text = "name: inl\n" + ACT
    app.inline_dag(text)
    assert hashed == [text]


def test_a_dag_cannot_take_a_python_workflow_name() -> None:
    """A DAG named like an existing Python workflow is refused; the workflow stays."""
    app = App()

    @app.workflow(name="taken")
    async def taken(ctx: object) -> None:  # pragma: no cover — never run
        return None

    with pytest.raises(ValueError, match="taken"):
        app.dag("name: taken\nsteps:\n  - name: s\n    command: 'true'\n")
    with pytest.raises(UnknownField):
        app.dag("name: x\nsteps:\n  - name: s\n    command: 'true'\n    foreach: [1]\n")
    assert app.workflows["taken"].fn is taken


def test_a_dag_is_named_by_daguss_rule_in_its_file_or_by_its_file(tmp_path: Path) -> None:
    """Dagu's DAG names (letters, digits, `_ . -`, at most 40) register, a leading digit and
    dots included; another name, written or taken from the file's stem, is refused naming
    `name`."""
    app = App()
    for name in ("etl.daily", "9lives", "x" * 40):
        assert app.dag(f"name: {name}\n" + GOOD.format(word="1")).name == name
        assert name in app.workflows
    write(tmp_path / "probe.v2.yaml", GOOD.format(word="1"), 1)
    write(tmp_path / "two words.yaml", GOOD.format(word="1"), 1)
    problems = app.load_dags(tmp_path)
    assert "probe.v2" in app.workflows and list(problems) == [str(tmp_path / "two words.yaml")]
    for bad in ("x" * 41, "..", "a/b"):
        with pytest.raises(InvalidValue) as info:
            app.dag(f"name: '{bad}'\n" + GOOD.format(word="1"))
        assert info.value.field == "name"
