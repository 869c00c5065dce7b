"""pytest fixtures for tests of workflows (docs/testing.md).

Loaded by the `pytest11` entry point `tether.testing.pytest_plugin` wherever Tether is
installed (`-p no:tether.testing.pytest_plugin` turns it off), or by
`pytest_plugins = ["tether.testing.pytest_plugin"]` in a conftest; both may be present.

* `tether_databases` (session): this process's `Databases`: one PostgreSQL server (embedded,
  or TETHER_DATABASE_URL's) and one migrated template, started in the setup of the first test
  that uses it, stopped at the end of the session.
* `tether_app`: the App under test. Override it: `@pytest.fixture def tether_app(): return app`.
* `tether_env`: an async `WorkflowEnvironment(tether_app)` on a fresh database (needs
  pytest-asyncio).

Nothing heavy is imported until a fixture runs.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from tether.runtime.registry import App
    from tether.testing.databases import Databases
    from tether.testing.environment import WorkflowEnvironment

#: Without pytest-asyncio, `tether_env` explains what is missing instead.
_ASYNCIO = importlib.util.find_spec("pytest_asyncio") is not None


@pytest.fixture(scope="session")
def tether_databases() -> Iterator[Databases]:
    """The test server and its migrated template, shared by the whole session (started here,
    in the setup of the first test that asks for them)."""
    from tether.testing import environment  # noqa: F401 — the runtime loads here, not in a test
    from tether.testing.databases import shared

    databases = shared()
    databases.start()
    try:
        yield databases
    finally:
        databases.close()


@pytest.fixture
def tether_app() -> App:
    """The App `tether_env` runs: override this fixture to return yours."""
    pytest.fail(
        "tether_env runs the App the `tether_app` fixture returns: define it, e.g. "
        "`@pytest.fixture def tether_app(): return app` in your conftest.py",
        pytrace=False,
    )


if _ASYNCIO:
    import pytest_asyncio

    @pytest_asyncio.fixture
    async def tether_env(
        tether_app: App, tether_databases: Databases
    ) -> AsyncIterator[WorkflowEnvironment]:
        """A running WorkflowEnvironment of `tether_app` on a fresh database."""
        from tether.testing.environment import WorkflowEnvironment

        async with WorkflowEnvironment(tether_app, databases=tether_databases) as env:
            yield env

else:  # pragma: no cover — the suite runs with pytest-asyncio

    @pytest.fixture
    def tether_env() -> NoReturn:
        """Needs pytest-asyncio."""
        pytest.fail(
            "tether_env is an async fixture: install pytest-asyncio, or use "
            "`async with tether.testing.WorkflowEnvironment(app) as env:` in your own",
            pytrace=False,
        )
