"""Logging for the command line: quiet by default, everything with `--verbose`.

Quiet means: no pgserver INFO lines (it logs every initdb and pg_ctl call with its output), no
httpx INFO lines (it logs every request; a worker polls remote tasks with it), no
platformdirs `RuntimeDirWarning` (pgserver asks it for a lock path; it warns when
XDG_RUNTIME_DIR is unset), and for the short commands (`runs`, `tokens`, `migrate`) only
warnings and errors of our own.
"""

from __future__ import annotations

import logging
import warnings

from tether.observability import logs
from tether.settings import Settings

LONG_RUNNING = frozenset({"serve", "worker"})
NOISY = ("pgserver", "asyncio", "httpx")


def log_level(command: str, requested: str | None, verbose: bool) -> str:
    """The level for our own loggers: what was asked, else DEBUG when verbose, else INFO for
    the long-running commands and WARNING for the rest."""
    if requested:
        return requested
    if verbose:
        return "DEBUG"
    return "INFO" if command in LONG_RUNNING else "WARNING"


def configure(level: str, verbose: bool, settings: Settings | None = None) -> None:
    """Set up logging once for this process (format and audit file from `settings`)."""
    if settings is None:
        logs.configure(level)
    else:
        logs.configure(level, settings.log_format, settings.audit_log)
    if not verbose:
        for name in NOISY:
            logging.getLogger(name).setLevel(logging.WARNING)
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
