"""Storage layer: the asyncpg pool, SQL files, migrations, LISTEN/NOTIFY, embedded PostgreSQL.

Owns every byte of SQL and every asyncpg call. Imports no other tether package; callers get
frozen rows and StorageError subclasses, never asyncpg objects or exceptions.
"""

from __future__ import annotations
