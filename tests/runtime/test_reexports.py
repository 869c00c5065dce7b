"""The storage types the runtime re-exports for surfaces (which reach storage only through the
runtime) are storage's own classes, not copies: isinstance and except clauses agree on both
sides. Our choice (surfaces reach storage only through the runtime)."""

from __future__ import annotations

from tether.runtime import error_map, rows, statuses
from tether.storage import errors as storage_errors
from tether.storage import rows as storage_rows


def test_runtime_reexports_are_the_storage_classes() -> None:
    """Every name a runtime re-export module lists is the very object storage defines."""
    for module, source in ((rows, storage_rows), (error_map, storage_errors)):
        assert module.__all__
        for name in module.__all__:
            assert getattr(module, name) is getattr(source, name), name
    assert statuses.ENDED_STATUSES is storage_rows.ENDED_STATUSES
