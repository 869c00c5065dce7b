"""Parent and child runs (a DAG step that calls another DAG; migration 0005): the link that
signals a child's end to its parent (a trigger does the signalling)."""

from __future__ import annotations

from tether.storage.errors import translated
from tether.storage.queries import Q
from tether.storage.repo import Conn


async def insert_child_link(conn: Conn, child_id: str, parent_id: str, step: str) -> None:
    """Link a child run to its parent; the child's end is then signalled to the parent."""
    with translated():
        await conn.execute(Q["insert_child_link"], child_id, parent_id, step)
