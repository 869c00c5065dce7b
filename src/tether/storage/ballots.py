"""What deciding an approval by votes and by links reads and writes beside the answer itself:
who started a run (separation of duties), and the nonces of approval links that have acted
(single use). Every asyncpg error leaves as a StorageError."""

from __future__ import annotations

from typing import Final

from tether.storage.driver import Queryable
from tether.storage.errors import translated
from tether.storage.queries import Q

#: How many runs back `starter` follows a chain (continue-as-new, a child's parent).
_MAX_HOPS: Final = 32
#: The members of a `created` event that name the run it came from.
_CAME_FROM: Final = ("continued_from", "retry_of", "resume_of", "rerun_of", "parent")


async def starter(conn: Queryable, run_id: str) -> str | None:
    """Who started `run_id`: the `by` of its `created` event, else of the run it came from (it
    continues it, retries, resumes or reruns it, or is its child), back along the chain; None
    when no run of it names anyone."""
    current: str | None = run_id
    for _ in range(_MAX_HOPS):
        if current is None:
            return None
        with translated():
            data = await conn.fetchval(Q["get_created"], current)
        if not isinstance(data, dict):
            return None
        by = data.get("by")
        if isinstance(by, str) and by:
            return by
        before = next((data[k] for k in _CAME_FROM if isinstance(data.get(k), str)), None)
        current = before
    return None


async def link_used(conn: Queryable, nonce: str) -> bool:
    """Whether the approval link with this nonce has acted already."""
    with translated():
        return bool(await conn.fetchval(Q["link_used"], nonce))


async def use_link(conn: Queryable, nonce: str, execution_id: str, key: str, approver: str) -> bool:
    """Mark the approval link used (call it in the answer's transaction); False when it had
    been used already."""
    with translated():
        return await conn.fetchval(Q["use_link"], nonce, execution_id, key, approver) is not None
