"""The runnable example in docs/client.md (docs/examples/client_review.py) runs as written
against a real server, over HTTP and over the database, and prints what the page says."""

from __future__ import annotations

import pytest

from tests import repo_scripts
from tests.conftest import database_env
from tests.e2e.conftest import serve
from tether.examples import app

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

EXAMPLE = "docs/examples/client_review.py"


@pytest.mark.parametrize("transport", ["http", "database"])
async def test_the_client_example_approves_a_review_and_prints_the_outcome(
    db_url: str, transport: str
) -> None:
    """Started, shown waiting for `publish`, approved, outcome printed; exit 0."""
    async with serve(app, db_url) as url:
        target = url if transport == "http" else db_url
        # Over the database, the client applies the pooler settings of TETHER_DATABASE_URL.
        database = database_env(db_url) if transport == "database" else {}
        text = await repo_scripts.run(EXAMPLE, {**database, "TETHER_URL": target})
    lines = text.splitlines()
    assert lines[0].startswith("started ex_") and lines[0].endswith(f"over {transport}")
    assert lines[1:] == [
        "waiting: approval 'publish': Publish 'Q3 report'? (Q3 report: 4 words)",
        "outcome: approved, ticket CHG-42, 1 round(s)",
    ]
