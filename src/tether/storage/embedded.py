"""Embedded PostgreSQL via pgserver, so a new user needs nothing but Python.

Facts that shape this module: the server outlives a SIGKILLed parent and the next
start on the same directory reuses it; pgserver's atexit hook does not run on SIGTERM, so we stop
it ourselves on graceful shutdown; as root it runs PostgreSQL as a separate `pgserver` user; its
unix socket lives under the data directory, so the path must stay short.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.storage.errors import DatabaseUnavailable

logger = logging.getLogger(__name__)


@dataclass
class EmbeddedServer:
    uri: str
    _server: Any

    def stop(self) -> None:
        """Release our handle; pgserver stops PostgreSQL when the last live handle goes."""
        _prune_dead_handles(Path(self._server.pgdata))
        self._server.cleanup()


def _prune_dead_handles(pgdata: Path) -> None:
    """Drop pids of SIGKILLed processes from pgserver's handle list, or it never stops."""
    path = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if _alive(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive), "utf-8")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pgdata_dir(data_dir: Path) -> Path:
    """Where the embedded PostgreSQL keeps its files under `data_dir`."""
    return (data_dir / "pg").resolve()


def exists(data_dir: Path) -> bool:
    """Whether an embedded database was ever created under `data_dir` (nothing is started)."""
    return (pgdata_dir(data_dir) / "PG_VERSION").is_file()


def start(data_dir: Path) -> EmbeddedServer:
    """Start (or reuse) PostgreSQL under `data_dir`/pg. Raises DatabaseUnavailable on failure."""
    from pgserver import get_server  # imported here: only the embedded default needs it

    pgdata = pgdata_dir(data_dir)
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if pgdata.exists():
        _prune_dead_handles(pgdata)
    try:
        server = get_server(pgdata, cleanup_mode="stop")
    except Exception as exc:  # pgserver raises bare exceptions from subprocesses
        raise DatabaseUnavailable(f"embedded PostgreSQL did not start in {pgdata}: {exc}") from exc
    uri = server.get_uri()
    logger.info("embedded PostgreSQL running in %s", pgdata)
    return EmbeddedServer(uri=uri, _server=server)
