"""A clock that runs ahead, for tests: the Python clock and the database's clock moved forward
together, so time can skip to the next wake-up instead of passing.

`SkippingClock` is `now()` plus how far it has been moved (`ahead`), in Python (installed as
the runtime's clock: runtime/clock.py) and in the database (`tether_now()` redefined on a
test's own database to read the same offset: storage/clock.py). Moving it is one transaction
that also wakes the workers of every run due at the new time. It never moves back.

When to move it is the caller's decision (tether.testing skips only while nothing can run);
`outlook` reads what that decision needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from tether.runtime import clock
from tether.runtime.operations.storage_errors import storage_errors
from tether.storage import clock as db_clock
from tether.storage import pool
from tether.storage.clock import Outlook
from tether.storage.driver import Database

__all__ = ["Outlook", "SkippingClock"]


class SkippingClock:
    """The system clock plus `ahead`, in Python and in one database.

    Call it for the time (it is a `clock.Clock`). Install it as the runtime's clock with
    `clock.installed(skipping_clock)`, and on its database with `install`, before the
    runtime starts there.
    """

    def __init__(self) -> None:
        self.ahead = timedelta(0)

    def __call__(self) -> datetime:
        return clock.system() + self.ahead

    async def install(self, dsn: str) -> None:
        """Make the database at `dsn` read this clock (a test's own database: a server's
        database must keep its clock). Once per database. Raises Unavailable."""
        with storage_errors():
            conn = await pool.connect(dsn)
            try:
                await db_clock.run_ahead(conn)
                if self.ahead:
                    await db_clock.set_ahead(conn, self.ahead)
            finally:
                await conn.close()

    async def skip(self, db: Database, by: timedelta) -> list[str]:
        """Move the clock `by` forward (a negative or zero amount moves nothing), here and in
        the database `db` reaches, and wake the workers of the runs due then; their ids.
        Raises Unavailable."""
        if by > timedelta(0):
            self.ahead += by
        with storage_errors():
            async with db.acquire() as conn:
                return await db_clock.set_ahead(conn, self.ahead)

    async def outlook(self, db: Database, lost: Sequence[str] = ()) -> Outlook:
        """The database's time, whether any run is due or held by a live worker, and the next
        wake-up; `lost`: `id:attempt` of runs whose worker died on that attempt (their lease
        only waits to expire). Raises Unavailable."""
        with storage_errors():
            return await db_clock.outlook(db, lost)
