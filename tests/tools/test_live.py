"""The live tool catalog (`tether.tools.live`): it follows the app's DAGs, rebuilding every
tool's definition when a DAG change can alter them, and only then."""

from __future__ import annotations

from typing import Any

import pytest

from tether.runtime.registry import App
from tether.tools import live
from tether.tools.catalog import DaguNames, collect
from tether.tools.live import LiveCatalog

STEPS = "steps:\n  - name: s\n    run: act\n"


def dag_app() -> App:
    app = App("live")

    @app.function("act")
    async def act() -> str:
        return "done"

    app.dag("name: stored\nmcp: true\n" + STEPS)
    return app


def test_an_inline_dag_rebuilds_nothing_and_a_stored_one_rebuilds_the_tools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Our choice: an inline DAG gets no tools, so registering or replacing one leaves the
    catalog as built; a stored DAG's tools still appear at once."""
    app = dag_app()
    builds: list[int] = []

    def counted(*args: Any) -> Any:
        builds.append(1)
        return collect(*args)

    monkeypatch.setattr(live, "collect", counted)
    catalog = LiveCatalog(app, dagu=DaguNames())
    with catalog.following():
        builds.clear()
        app.inline_dag("name: one\n" + STEPS, default_name="one")
        app.inline_dag("name: one\ndescription: again\n" + STEPS, default_name="one")
        assert builds == []
        app.dag("name: other\nmcp: true\n" + STEPS)
        assert builds == [1]
    assert "start_other" in {t["name"] for t in catalog.listing}
    assert not {"start_one", "one_status"} & {t["name"] for t in catalog.listing}


def test_the_last_dag_removed_takes_the_dagu_tools_along() -> None:
    """Our choice: the dagu tools are served while the app has DAGs, inline ones included."""
    app = dag_app()
    app.inline_dag("name: one\n" + STEPS, default_name="one")
    catalog = LiveCatalog(app, dagu=DaguNames())
    with catalog.following():
        app.remove_dag("stored")
        assert "dagu_execute" in {t["name"] for t in catalog.listing}
        app.remove_dag("one")
        assert "dagu_execute" not in {t["name"] for t in catalog.listing}
