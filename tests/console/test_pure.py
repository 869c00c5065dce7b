"""The console's pure parts (forms, sessions, DAG layout) and its setting."""

from __future__ import annotations

import pytest

from tests.apps.console import app
from tether.app import create_app
from tether.console import forms, graph
from tether.console.session import console_key, csrf_ok, csrf_token, issue, read
from tether.runtime import errors
from tether.runtime.remote.call import RemoteInput
from tether.settings import Settings


def test_console_is_on_only_for_a_dev_server_unless_set() -> None:
    assert Settings.from_env({}).console_enabled()
    assert not Settings.from_env({"TETHER_DATABASE_URL": "postgresql://x/y"}).console_enabled()
    assert not Settings.from_env({"TETHER_HOST": "0.0.0.0"}).console_enabled()  # noqa: S104
    on = {"TETHER_DATABASE_URL": "postgresql://x/y", "TETHER_CONSOLE": "true"}
    assert Settings.from_env(on).console_enabled()


def test_sessions_are_signed_and_expire() -> None:
    key = console_key(b"secret")
    s = issue(key, "t", "ab" * 32, now=1000.0)
    assert read(key, s.value, 1001.0) == s
    assert read(key, s.value, s.expires + 1.0) is None
    assert read(console_key(b"other"), s.value, 1001.0) is None
    assert read(key, s.value.replace("t.", "n.", 1), 1001.0) is None
    assert csrf_ok(key, s, csrf_token(key, s))
    assert not csrf_ok(key, issue(key, "n", "", 1000.0), csrf_token(key, s))


def test_human_task_form_fields_and_typed_answer() -> None:
    schema = {
        "properties": {
            "title": {"type": "string", "title": "Title"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "ok": {"type": "boolean"},
            "size": {"enum": ["s", "m"]},
        },
        "required": ["title", "count"],
    }
    wait = {"key": "k", "kind": "human_task", "name": "fill", "form": schema, "feedback": {}}
    form = forms.wait_form(wait)
    widgets = {f.name: (f.widget, f.required) for f in form.fields}
    assert widgets == {
        "f.title": ("text", True),
        "f.count": ("integer", True),
        "f.ratio": ("number", False),
        "f.ok": ("checkbox", False),
        "f.size": ("select", False),
    }
    data = {
        "decision": "complete",
        "f.title": "x",
        "f.count": "3",
        "f.ratio": "2.5",
        "f.ok": "true",
        "f.size": "",
    }
    assert forms.response(form, data) == {
        "decision": "complete",
        "title": "x",
        "count": 3,
        "ratio": 2.5,
        "ok": True,
    }
    # not a number: refused naming the field, by the one rule for text on every surface (it
    # was passed on as typed, for the answer path's schema check to refuse)
    with pytest.raises(errors.AnswerRejected) as refused:
        forms.response(form, {**data, "f.count": "three"})
    assert [e.split(":")[0] for e in refused.value.errors] == ["count"]


def test_a_remote_question_is_a_form_of_the_remotes_fields() -> None:
    """A `remote_input` wait (a remote tool's question) shows the remote's form as fields,
    and the answer is the form filled in, as the remote asked for it."""
    spec = RemoteInput(
        "peer/ask#3.1",
        "Who signs?",
        schema={
            "type": "object",
            "properties": {"name": {"type": "string"}, "copies": {"type": "integer"}},
            "required": ["name"],
        },
        remote="peer",
        tool="ask",
    )
    form = forms.wait_form(spec.descriptor("k", "2026-08-01T00:00:00+00:00", None))
    assert (form.kind, form.prompt, form.payload) == ("remote_input", "Who signs?", False)
    assert {f.name: (f.widget, f.required) for f in form.fields} == {
        "f.name": ("text", True),
        "f.copies": ("integer", False),
    }
    assert forms.response(form, {"f.name": "Ada", "f.copies": "2"}) == {"name": "Ada", "copies": 2}


def test_dag_layout_puts_each_step_right_of_its_dependencies() -> None:
    g = graph.layout(["a", "b", "c", "d"], {"b": ["a"], "c": ["a"], "d": ["b", "c"]}, {})
    at = {n.name: n for n in g.nodes}
    assert at["a"].x < at["b"].x == at["c"].x < at["d"].x
    assert at["b"].y != at["c"].y
    assert len(g.edges) == 4
    assert all(e.x1 < e.x2 for e in g.edges)


def test_a_production_server_serves_no_console_unless_told() -> None:
    def paths(**settings: str) -> set[str]:
        web = create_app(app, Settings.model_validate(settings), "postgresql://unused")
        return {getattr(route, "path", "") for route in web.routes}

    assert "/console" not in paths(database_url="postgresql://db/tether")
    assert "/console" in paths(database_url="postgresql://db/tether", console="true")


def test_a_csrf_token_with_any_characters_is_refused_not_an_error() -> None:
    """Our choice: a forged form may carry any text as its token (it used to raise TypeError
    in the comparison, a 500)."""
    key = console_key(b"secret")
    s = issue(key, "n", "", now=1000.0)
    for forged in ("é" * 40, "\u0000", "😀", "\udc80", csrf_token(key, s) + "é"):
        assert not csrf_ok(key, s, forged)
