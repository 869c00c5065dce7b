"""Admission rules as data: parsing settings, labels and workflow options (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from tether.runtime import errors
from tether.runtime.admission import (
    Admission,
    Profile,
    label_filter,
    merge_params,
    parse_labels,
    parse_profiles,
    parse_queues,
    queue_limits,
)
from tether.runtime.context import Context
from tether.runtime.registry import App
from tether.settings import Settings
from tether.specs.dag import parse_label


def test_queues_parse_from_name_equals_limit_pairs() -> None:
    assert parse_queues("default=4, reports=1,") == {"default": 4, "reports": 1}
    assert parse_queues("") == {}


@pytest.mark.parametrize("text", ["reports", "reports=0", "Reports=1", "a=1,a=2", "a=x", "a=-1"])
def test_a_bad_queue_setting_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_queues(text)


def test_profiles_parse_from_json_and_bad_ones_are_refused() -> None:
    got = parse_profiles('{"prod": {"env": {"A": "1"}, "params": {"n": 2}}}')
    assert got["prod"].env == {"A": "1"} and got["prod"].params == {"n": 2}
    for bad in ("[]", "{", '{"Prod": {}}', '{"p": {"env": {"A": 1}}}', '{"p": {"x": {}}}'):
        with pytest.raises(ValueError):
            parse_profiles(bad)


def test_settings_read_profiles_from_a_file_and_refuse_a_missing_one(tmp_path: Any) -> None:
    path = tmp_path / "profiles.json"
    path.write_text('{"dev": {"env": {"X": "y"}}}', encoding="utf-8")
    adm = Settings.from_env({"TETHER_PROFILES": str(path), "TETHER_QUEUES": "a=2"}).admission()
    assert adm.profile("dev").env == {"X": "y"} and adm.queues == {"a": 2}
    assert Settings.from_env({}).worker_settings().admission == Admission()
    with pytest.raises(ValueError):
        Settings.from_env({"TETHER_PROFILES": str(tmp_path / "missing.json")})
    with pytest.raises(ValueError):
        Settings.from_env({"TETHER_SCHEDULE_CATCHUP": "some"})


def test_labels_are_validated_and_keys_lowercased() -> None:
    """Dagu's label patterns."""
    assert parse_labels(["Team=data", "nightly", "path=a/b.c"]) == {
        "team": "data",
        "nightly": "",
        "path": "a/b.c",
    }
    for bad in (["=x"], ["-a=b"], ["a=/b"], ["a=b c"], ["k" * 64], [f"a={'v' * 256}"]):
        with pytest.raises(errors.InvalidInput):
            parse_labels(bad)
    assert label_filter(["a=1", "b"]) == ({"a": "1"}, ["b"])


def test_profile_params_merge_under_the_input() -> None:
    prof = Profile("p", params={"a": 1, "b": 2})
    assert merge_params(prof, {"b": 3}) == {"a": 1, "b": 3}
    assert merge_params(prof, None) == {"a": 1, "b": 2}
    assert merge_params(Profile("e"), 5) == 5
    with pytest.raises(errors.InvalidInput):
        merge_params(prof, [1])
    with pytest.raises(errors.ProfileNotFound):
        Admission().profile("p")


def test_worker_queue_limits_include_each_workflow_s_implicit_queue() -> None:
    adm = Admission(queues={"reports": 2})
    assert queue_limits(adm, {"a": None, "b": 3}) == {"reports": 2, "workflow:b": 3}


@pytest.mark.parametrize(
    "options",
    [
        {"queue": "Bad Name"},
        {"max_active_runs": 0},
        {"queue": "q", "max_active_runs": 2},
        {"labels": ["bad label"]},
        {"schedule": "61 * * * *"},
        {"schedule": ["*/5 * * * *", "nope"]},
    ],
)
def test_bad_admission_options_are_refused_at_registration(options: dict[str, Any]) -> None:
    app = App()
    with pytest.raises(ValueError):

        @app.workflow(**options)  # type: ignore[untyped-decorator]  # **options: Any picks no overload
        async def wf(ctx: Context) -> None:
            return None

    assert "wf" not in app.workflows


@pytest.mark.parametrize(
    "text", ["team=ops", "a" * 63, "a" * 64, "k=" + "v" * 255, "k=" + "v" * 256, "k=-v", "-k"]
)
def test_a_dag_spec_and_a_workflow_accept_the_same_labels(text: str) -> None:
    """Our choice: one label rule (specs.dag.values) for a DAG's `labels:` and a workflow's
    `labels=`, so a label is accepted by both or refused by both."""
    try:
        parse_label(text)
    except ValueError:
        in_spec = False
    else:
        in_spec = True
    try:
        parse_labels([text])
    except errors.InvalidInput:
        in_workflow = False
    else:
        in_workflow = True
    assert in_spec == in_workflow
