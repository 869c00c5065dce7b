"""Unknown input fields: refused by default on every surface (they share the registry's
validation), ignored when the workflow opts in, and a model's own `extra` policy wins."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from tether import App, Context
from tether.runtime.errors import InvalidInput


class Job(BaseModel):
    steps: int = 1


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    steps: int = 1


def make_app() -> App:
    app = App()

    @app.workflow
    async def strict(ctx: Context, job: Job) -> int:
        return job.steps

    @app.workflow(extra_input="ignore")
    async def lenient(ctx: Context, job: Job) -> int:
        return job.steps

    @app.workflow
    async def own_policy(ctx: Context, job: Loose) -> int:
        return job.steps

    return app


def test_an_unknown_field_is_refused_naming_it() -> None:
    """A typo must not silently run with the defaults."""
    with pytest.raises(InvalidInput) as exc_info:
        make_app().get("strict").parse_input({"stepz": 3})
    assert exc_info.value.errors == [
        {"loc": ["stepz"], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"}
    ]


def test_the_published_schema_forbids_additional_properties() -> None:
    schema = make_app().get("strict").input_schema()
    assert schema["additionalProperties"] is False and schema["title"] == "Job"


def test_the_parsed_input_is_still_the_users_model() -> None:
    parsed = make_app().get("strict").parse_input({"steps": 2})
    assert isinstance(parsed, Job) and parsed.steps == 2


def test_a_workflow_can_opt_into_ignoring_extras() -> None:
    wf = make_app().get("lenient")
    assert wf.parse_input({"stepz": 3}).steps == 1
    assert "additionalProperties" not in wf.input_schema()


def test_a_models_own_extra_policy_wins() -> None:
    assert make_app().get("own_policy").parse_input({"other": 1}).steps == 1
