"""The published JSON Schema (package data) agrees with the loader on our files and tables."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest
import yaml

from tests.specs.realm.test_loader_table import INVALID, VALID
from tests.specs.realm.test_workflow_files import INSIDE, OUTSIDE, WORKFLOWS
from tests.specs.realm.test_workflow_files import INVALID as REFUSED

SCHEMA = json.loads(
    resources.files("tether.specs.realm").joinpath("schema.json").read_text(encoding="utf-8")
)
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)


def _errors(text: str) -> list[jsonschema.ValidationError]:
    return list(VALIDATOR.iter_errors(yaml.safe_load(text)))


def test_schema_is_a_valid_draft7_schema() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("stem", INSIDE)
def test_schema_accepts_the_workflow_files_the_loader_loads(stem: str) -> None:
    assert _errors((WORKFLOWS / f"{stem}.yaml").read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("stem", sorted([*OUTSIDE, *REFUSED]))
def test_schema_refuses_the_workflow_files_the_loader_refuses(stem: str) -> None:
    assert _errors((WORKFLOWS / f"{stem}.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("text", [text for text, *_ in VALID])
def test_schema_accepts_the_valid_table(text: str) -> None:
    assert _errors(text) == []


@pytest.mark.parametrize(
    "text", [text for text, kind, *_ in INVALID if kind.__name__ == "UnknownField"]
)
def test_schema_refuses_fields_outside_the_subset(text: str) -> None:
    assert _errors(text)


def test_schema_refuses_fields_on_the_wrong_kind() -> None:
    text = (
        "id: w\nname: W\nversion: 1\nsteps:\n  a:\n    description: A\n    execution: agent\n"
        "    handler: h\n"
    )
    assert _errors(text)
    assert _errors(text.replace("execution: agent", "execution: auto")) == []
