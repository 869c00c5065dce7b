"""Labelled counters and histograms kept as plain numbers, turned into metric families only
at scrape time, for the metrics recorded per run, attempt, step or request.

prometheus_client's `Counter(...).labels(...).inc()` takes three locks and a dozen calls per
event (about 18 k CPU instructions; a three-step run's eight events cost 146 k, 8 % of it).
Here a series is looked up once per label values and cached; recording is then an addition
on a list under the one lock of its `Series` collector. The exposition is what
prometheus_client's own Counter and Histogram write for the same events: names, help, labels,
buckets, `_created` (tests/observability/test_run_metrics.py compares them line by line).

Recording code counts and observes under `Series.lock`, through `Series.tally` (`acquire`/
`release` cost about 1 k instructions less than `with`); a histogram's bucket is
`bisect_left(bounds, value)` (a bucket counts values up to and including its bound, as
Prometheus's `le`; past every bound, only +Inf)::

    count, duration = RUNS.cell(workflow), DURATION.cell(workflow)
    SERIES.tally(count, duration, DURATION.bounds, seconds)
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Final

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

Cell = list[float]  # a counter: [value, created]; a histogram: [per bucket..., sum, created]
Key = tuple[str, ...]  # label values, in the order of the label names


class _Family:
    """One labelled metric: its cells by label values, made on first use."""

    __slots__ = ("cells", "documentation", "labelnames", "lock", "name")

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], lock: threading.Lock
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.lock = lock
        self.cells: dict[Key, Cell] = {}

    def cell(self, *values: str) -> Cell:
        """The cell of these label values (made, with its creation time, the first time)."""
        cell = self.cells.get(values)
        if cell is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name} takes labels {self.labelnames}, got {values}")
            with self.lock:
                cell = self.cells.setdefault(values, self._empty())
        return cell

    def _empty(self) -> Cell:
        raise NotImplementedError

    def family(self, cells: list[tuple[Key, Cell]]) -> Metric:
        raise NotImplementedError


class CounterSeries(_Family):
    """A labelled counter (`<name>_total`, `<name>_created`). Add to `cell(...)[0]`."""

    __slots__ = ()

    def _empty(self) -> Cell:
        return [0.0, time.time()]

    def family(self, cells: list[tuple[Key, Cell]]) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for key, (value, created) in cells:
            family.add_metric(key, value, created=created)
        return family


class HistogramSeries(_Family):
    """A labelled histogram (`_bucket`, `_count`, `_sum`, `_created`). Record with `observe`."""

    __slots__ = ("_edges", "bounds")

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        lock: threading.Lock,
        buckets: Sequence[float],
    ) -> None:
        super().__init__(name, documentation, labelnames, lock)
        self.bounds = tuple(float(b) for b in buckets)
        # prometheus_client's own spelling of a bound ("1.0", "0.0025"), as its Histogram's
        self._edges = [floatToGoString(b) for b in self.bounds] + ["+Inf"]  # type: ignore[no-untyped-call]

    def _empty(self) -> Cell:
        return [0.0] * (len(self.bounds) + 2) + [time.time()]

    def family(self, cells: list[tuple[Key, Cell]]) -> Metric:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for key, values in cells:
            cumulative, total = [], 0.0
            for edge, count in zip(self._edges, values, strict=False):
                total += count
                cumulative.append((edge, total))
            family.add_metric(list(key), cumulative, values[-2])
            family.add_sample(
                f"{self.name}_created", dict(zip(self.labelnames, key, strict=True)), values[-1]
            )
        return family


class Series(Collector):
    """Families sharing one lock, exposed in the order they were made (register it once)."""

    def __init__(self) -> None:
        self.lock: Final = threading.Lock()  # a scrape may run in a thread; recording is short
        self._families: list[_Family] = []

    def counter(self, name: str, documentation: str, labelnames: Sequence[str]) -> CounterSeries:
        family = CounterSeries(name, documentation, labelnames, self.lock)
        self._families.append(family)
        return family

    def histogram(
        self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float]
    ) -> HistogramSeries:
        family = HistogramSeries(name, documentation, labelnames, self.lock, buckets)
        self._families.append(family)
        return family

    def tally(
        self, count: Cell | None, histogram: Cell, bounds: tuple[float, ...], value: float
    ) -> None:
        """One event under the lock: `count` (when given) +1 and `value` observed in
        `histogram` (a cell of a HistogramSeries whose bounds are `bounds`)."""
        self.lock.acquire()
        try:
            if count is not None:
                count[0] += 1.0
            histogram[bisect.bisect_left(bounds, value)] += 1.0
            histogram[-2] += value
        finally:
            self.lock.release()

    def collect(self) -> Iterator[Metric]:
        with self.lock:
            copies = [[(k, list(c)) for k, c in f.cells.items()] for f in self._families]
        for family, cells in zip(self._families, copies, strict=True):
            yield family.family(cells)
