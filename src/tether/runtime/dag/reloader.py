"""Keep an App's DAGs in step with a directory (`tether serve --dags DIR`): poll file mtimes,
register new and changed files, forget deleted ones. A bad file is reported (logged and
returned) and the DAG it held before stays registered; the other files are unaffected.
Runs already started keep the spec they recorded when they began."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from tether.runtime.dag.catalog import DagCatalog
from tether.specs.dag import DagSpecError
from tether.specs.yaml_nodes import yaml_files

logger = logging.getLogger(__name__)


@dataclass
class ScanReport:
    loaded: list[str] = field(default_factory=list)  # DAG names registered or replaced
    removed: list[str] = field(default_factory=list)
    problems: dict[str, str] = field(default_factory=dict)  # file → why it was refused


class DagReloader:
    """Poll `directory` every `interval_s` seconds (`scan()` once for a synchronous load)."""

    def __init__(self, app: DagCatalog, directory: str | Path, interval_s: float = 2.0) -> None:
        self.app = app
        self.directory = Path(directory)
        self.interval_s = interval_s
        self._seen: dict[Path, float] = {}
        self._stop = asyncio.Event()

    def scan(self) -> ScanReport:
        report = ScanReport()
        present = {p: p.stat().st_mtime for p in yaml_files(self.directory)}
        for path, mtime in sorted(present.items()):
            if self._seen.get(path) == mtime:
                continue
            self._seen[path] = mtime
            try:
                report.loaded.append(self.app.dag(path).name)
            except (DagSpecError, OSError, ValueError) as exc:
                report.problems[str(path)] = str(exc)
                logger.warning("DAG file %s refused: %s", path, exc)
        for path in set(self._seen) - set(present):
            del self._seen[path]
            for name, entry in list(self.app.dags.items()):
                if entry.file == str(path):
                    self.app.remove_dag(name)
                    report.removed.append(name)
        return report

    async def run(self) -> None:
        """Scan until `stop()`; a scan that fails (the directory vanished) is logged."""
        while not self._stop.is_set():
            try:
                self.scan()
            except OSError:
                logger.exception("cannot scan DAG directory %s", self.directory)
            try:
                async with asyncio.timeout(self.interval_s):
                    await self._stop.wait()
            except TimeoutError:
                continue

    def stop(self) -> None:
        self._stop.set()
