"""Encryption at rest, as the runtime and the surfaces see it: which keys this process uses,
the read gate, and key rotation.

Sealing happens at the storage edge (`storage/sealing.py`): with `Encryption` installed,
every payload written is sealed and every row read is opened, so the runtime — workers
replaying runs — always works on plaintext. The surfaces pass what they show a caller through
the read gate: a run's output is shown decoded only to a principal the gate admits (`admin`,
and the roles in `decrypt_for`); anyone else sees the stored envelope in its place
(`{"$enc": "v1", "kid": …, "n": …, "c": …}`), as Harvest's status tool shows the stored bytes.

The runtime imports no settings: the app and CLI wiring build `Encryption` from theirs
(`Settings.encryption()`) and hand it to `service.running` / `service.operations`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tether.principal import Principal
from tether.runtime.operations.queries import RunView
from tether.runtime.operations.storage_errors import storage_errors
from tether.storage import rotation, sealing
from tether.storage.driver import Queryable
from tether.storage.rotation import DEFAULT_BATCH, Progress, RotationReport
from tether.storage.rows import ExecutionRow
from tether.storage.sealing import KeyRing, new_key

__all__ = [
    "DEFAULT_BATCH",
    "Encryption",
    "KeyRing",
    "Progress",
    "RotationReport",
    "installed",
    "new_key",
    "reveals",
    "rotate",
    "shown",
    "shown_view",
]

ALWAYS_ADMITTED = frozenset({"admin"})


@dataclass(frozen=True)
class Encryption:
    """The keys (the first seals new writes) and the roles besides admin that read decoded."""

    keys: KeyRing
    decrypt_for: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, keys: str, decrypt_for: Iterable[str] = ()) -> Encryption:
        """From `k2:base64,k1:base64` and role names. Raises ValueError naming the problem."""
        return cls(KeyRing.parse(keys), frozenset(r.strip() for r in decrypt_for if r.strip()))


_gates: list[frozenset[str]] = []


@contextlib.contextmanager
def installed(encryption: Encryption | None) -> Iterator[None]:
    """Seal, open and gate with `encryption` in this process while the block runs (nothing
    when None). One key ring per process is the model; installs nest for tests."""
    if encryption is None:
        yield
        return
    uninstall = sealing.install(encryption.keys)
    gate = ALWAYS_ADMITTED | encryption.decrypt_for
    _gates.append(gate)
    try:
        yield
    finally:
        _gates.remove(gate)
        uninstall()


def reveals(principal: Principal | None) -> bool:
    """Whether the read gate shows this principal decoded outputs: always when encryption is
    off (nothing is sealed); else when its role is admin or one of `decrypt_for`. A request
    without a principal (no security layer) is not admitted."""
    if not _gates:
        return True
    return principal is not None and principal.role in _gates[-1]


def shown(row: ExecutionRow, reveal: bool) -> ExecutionRow:
    """`row` as the read gate shows it: as it is when `reveal`, or when nothing of it was
    sealed; else with the stored envelopes in place of its input and output."""
    if reveal or row.sealed is None:
        return row
    gated = object.__new__(ExecutionRow)
    gated.__dict__.update(row.__dict__)
    gated.__dict__.update(row.sealed)
    return gated


def shown_view(view: RunView, reveal: bool) -> RunView:
    """A run view as the read gate shows it (`shown` on each of its rows)."""
    if reveal or all(r.sealed is None for r in view.chain):
        return view
    return RunView(
        shown(view.requested, reveal),
        shown(view.current, reveal),
        tuple(shown(r, reveal) for r in view.chain),
    )


async def rotate(
    pool: Queryable,
    keys: KeyRing,
    *,
    batch: int = DEFAULT_BATCH,
    progress: Progress | None = None,
) -> RotationReport:
    """Re-seal every stored payload under `keys.current`, `batch` rows at a time (see
    `storage.rotation`). Raises Unavailable (also when a payload is sealed under a key `keys`
    lacks, or fails authentication: the message names it), ValueError for a bad batch."""
    with storage_errors():
        return await rotation.rotate(pool, keys, batch=batch, progress=progress)
