"""The tool catalog of a serving App, kept in step with its DAGs.

`tether serve --dags DIR` reloads DAG files while it runs (runtime/dag/reloader.py). The
catalog follows: every registration, replacement or removal of a DAG rebuilds it in place (the
tool service, the task service, the role check and the header ladder all hold this one object),
so `tools/list` and `tools/call` see a new DAG's tools at once, without a restart. When the
`tools/list` entries differ from before, each watcher is told (the `subscriptions/listen`
streams that asked for `toolsListChanged`). A rebuild that leaves the listing as it was (a DAG
without `mcp: true` changed) tells nobody. A DAG that arrived inline (`dagu_execute`) gets no
tools, so registering or replacing one rebuilds nothing: the rebuild costs a tool definition
(its JSON Schemas) per tool of the app, and inline specs arrive at the callers' pace.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

from tether.runtime.dag.catalog import DagEntry
from tether.runtime.registry import App
from tether.tools.catalog import Catalog, DaguNames, collect

logger = logging.getLogger(__name__)

Changed = Callable[[], None]


class LiveCatalog(Catalog):
    """A Catalog rebuilt from `app` whenever its DAGs change (while `following()`)."""

    def __init__(self, app: App, *, dagu: DaguNames | None = None) -> None:
        self.app = app
        self.dagu = dagu
        self._watchers: list[Changed] = []
        self._built_from = self._served()
        super().__init__(*collect(app, dagu))

    def refresh(self) -> bool:
        """Rebuild from the app; True (and every watcher told) when tools/list changed."""
        before = self.listing
        self._built_from = self._served()
        Catalog.__init__(self, *collect(self.app, self.dagu))
        if self.listing == before:
            return False
        logger.info("tool list changed: %d tools", len(self.listing))
        for changed in list(self._watchers):
            changed()
        return True

    def watch(self, changed: Changed) -> Callable[[], None]:
        """Call `changed()` whenever tools/list changes; returns the function that stops it."""
        self._watchers.append(changed)
        return lambda: self._watchers.remove(changed)

    @contextlib.contextmanager
    def following(self) -> Iterator[LiveCatalog]:
        """Follow the app's DAGs for the duration of the block (a server's lifetime)."""
        stop = self.app.watch_dags(self._dags_changed)
        try:
            self.refresh()  # whatever changed between the build and now
            yield self
        finally:
            stop()

    def _dags_changed(self) -> None:
        """Rebuild unless the change left what the catalog is built from as it was."""
        served = self._served()
        built = self._built_from
        if len(served) != len(built) or any(a is not b for a, b in zip(served, built, strict=True)):
            self.refresh()

    def _served(self) -> list[object]:
        """What of the app a DAG change can alter in the catalog, by identity (a DAG
        registered again is a new workflow): whether it has DAGs at all (the dagu tools), and
        its workflows but the inline DAGs', which get no tools."""
        dags = self.app.dags
        kept = [wf for name, wf in self.app.workflows.items() if not _inline(dags.get(name))]
        return [bool(dags), *kept]


def _inline(entry: DagEntry | None) -> bool:
    return entry is not None and entry.inline
