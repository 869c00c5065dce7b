"""The published JSON Schema agrees with the loader on the DAG files and the refusal table."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.specs.test_dag_files import DAG_FILES, INSIDE, OUTSIDE
from tests.specs.test_loader_table import INVALID

SCHEMA = json.loads(
    resources.files("tether.specs.dag").joinpath("schema.json").read_text(encoding="utf-8")
)
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)


def _errors(path: Path) -> list[jsonschema.ValidationError]:
    return list(VALIDATOR.iter_errors(yaml.safe_load(path.read_text(encoding="utf-8"))))


def test_schema_is_a_valid_draft7_schema() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("stem", INSIDE)
def test_schema_accepts_the_files_the_loader_loads(stem: str) -> None:
    assert _errors(DAG_FILES / f"{stem}.yaml") == []


@pytest.mark.parametrize("stem", sorted(OUTSIDE))
def test_schema_refuses_the_files_the_loader_refuses(stem: str) -> None:
    assert _errors(DAG_FILES / f"{stem}.yaml")


@pytest.mark.parametrize(
    "spec", [s for s, kind, _, _ in INVALID if kind.__name__ == "UnknownField"]
)
def test_schema_refuses_fields_outside_the_subset(spec: str) -> None:
    """Each document is checked (a file of several names the field of the one at fault)."""
    assert [e for doc in yaml.safe_load_all(spec) for e in VALIDATOR.iter_errors(doc)]


@pytest.mark.parametrize(
    "spec",
    [
        'steps:\n  - echo "a, b"\n  - - echo b\n    - {command: echo c}\n  - echo d\n',
        "steps:\n  wash: {command: echo rinse}\n  dry: {command: echo spin, depends: wash}\n",
        "steps:\n  - command: echo\n    output: ${OUT}\n    precondition: test -f x\n"
        "  - script: echo\n    preconditions: [{command: test -d /}]\n",
        "schedule: 'CRON_TZ=Asia/Tokyo 5 9 * * *'\nsteps: [{command: x}]\n",
        "working_dir: .\nshell: [bash, -e]\nsteps:\n  - action: dag.run\n"
        "    with: {dag: child, params: X=1}\n",
    ],
)
def test_schema_accepts_the_loaders_other_forms(spec: str) -> None:
    """The older and newer spellings the loader accepts (tests/specs/test_dagu_forms.py)."""
    assert list(VALIDATOR.iter_errors(yaml.safe_load(spec))) == []
