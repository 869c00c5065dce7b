"""DAG runtime fixtures: an App with DAGs, run against the per-test database."""

from __future__ import annotations

import pytest

from tests.runtime.conftest import FAST, Start, start

__all__ = ["FAST", "Start", "start"]

pytestmark = pytest.mark.postgres
