"""The runtime's service helpers: opening operations on a database that cannot be reached is
the runtime's Unavailable (which every surface reports), not a storage error."""

from __future__ import annotations

import pytest

from tether.runtime.errors import Unavailable
from tether.runtime.registry import App
from tether.runtime.service import operations


async def test_operations_on_an_unreachable_database_are_unavailable() -> None:
    """Our choice: surfaces catch the runtime's errors only (`tether runs`, the client)."""
    with pytest.raises(Unavailable):
        async with operations("postgresql://tether@127.0.0.1:9/nothing", App()):
            pass
