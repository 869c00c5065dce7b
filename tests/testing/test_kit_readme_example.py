"""The testing guide's examples (docs/testing.md), run as written against the README's `review`
workflow (a step, an approval, an hour's sleep), end to end on a real PostgreSQL with time
skipping; and checks that the guide shows these very functions."""

from __future__ import annotations

import inspect
import re
import types
from pathlib import Path

import pytest

import tether
import tether.testing

# The session's server and template start in the setup of the first test that uses them, so
# a test's own duration is its environment's: a fresh database, the runtime, the run.
pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("tether_databases")]

REPO = Path(__file__).resolve().parents[2]
GUIDE = (REPO / "docs/testing.md").read_text("utf-8")


def _blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def _readme_example() -> types.ModuleType:
    """The README's "Writing workflows" example as a module named `reviews`, as the guide
    imports it."""
    readme = (REPO / "README.md").read_text("utf-8")
    (code,) = [b for b in _blocks(readme) if "def review(" in b]
    module = types.ModuleType("reviews")
    exec(compile(code, "README.md", "exec"), module.__dict__)  # noqa: S102 — our own README
    return module


reviews = _readme_example()
app: tether.App = reviews.app  # the guide: `from reviews import app`


# --- the guide's examples, as written ----------------------------------------------------------


async def test_review_is_published_an_hour_after_approval() -> None:
    async with tether.testing.WorkflowEnvironment(app) as env:
        run = await env.start("review", {"title": "Q3 plan", "body": "three short words"})
        (publish,) = await env.wait_until_waiting(run, "publish")
        assert publish.required == ("ticket",)
        assert (await env.run(run)).details == "waiting for approval of Q3 plan (3 words)"
        await env.approve(run, "publish", inputs={"ticket": "CHG-42"})
        assert await env.result(run) == "published with CHG-42"  # the hour's sleep is skipped
        assert [e.type for e in await env.history(run)] == ["created", "answer", "ended"]


@pytest.fixture
def tether_app() -> tether.App:
    return app


async def test_a_pushed_back_review_starts_over(
    tether_env: tether.testing.WorkflowEnvironment,
) -> None:
    run = await tether_env.start("review", {"title": "Q3 plan", "body": "draft"})
    await tether_env.push_back(run, "publish", {"note": "too long"})
    (again,) = await tether_env.wait_until_waiting(run, "publish")
    successor = await tether_env.run(run)  # the handle follows to the new run
    assert successor.predecessor_id == run and again.key.startswith(successor.id)
    with pytest.raises(tether.testing.AnswerRejected):
        await tether_env.approve(run, "publish")  # the ticket is required
    await tether_env.approve(run, "publish", {"ticket": "CHG-43"})
    assert await tether_env.result(run) == "published with CHG-43"


# --- the guide shows them ------------------------------------------------------------------


@pytest.mark.parametrize(
    "example",
    [test_review_is_published_an_hour_after_approval, test_a_pushed_back_review_starts_over],
)
def test_the_guide_shows_this_example_as_written(example: object) -> None:
    """Our choice: each example test in docs/testing.md is a function of this module, word for
    word, so the guide's code is run by the suite."""
    source = inspect.getsource(example)  # type: ignore[arg-type]
    assert any(source.strip() in block for block in _blocks(GUIDE)), example


def test_the_guide_imports_the_readme_example_as_reviews() -> None:
    """The guide's examples import the README's workflow as `reviews`, which this module
    builds from README.md."""
    shown = [b for b in _blocks(GUIDE) if '"review"' in b and "async def test_" in b]
    assert len(shown) == 2 and all("from reviews import app" in b for b in shown)
    assert reviews.review.__name__ == "review"


async def test_the_guides_crash_example_runs_as_written() -> None:
    """The guide's simulated-crash example (its own App, steps and test) passes as shown."""
    (code,) = [b for b in _blocks(GUIDE) if "crash_at(" in b and "async def test_" in b]
    module = types.ModuleType("crash_example")
    exec(compile(code, "docs/testing.md", "exec"), module.__dict__)  # noqa: S102 — our own guide
    tests = [v for k, v in vars(module).items() if k.startswith("test_")]
    assert len(tests) == 1
    await tests[0]()
