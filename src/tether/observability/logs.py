"""Structured logs: one JSON object per line when TETHER_LOG_FORMAT=json (text by default),
with the run (workflow, attempt) and trace ids of the code that logged; the audit stream
(`tether.audit`) optionally in a file of its own.

A run id is a task id, a bearer-grade secret: it is written only on DEBUG lines.
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

import orjson

from tether.observability import tracing

AUDIT_LOGGER: Final = "tether.audit"
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LogFormat = Literal["text", "json"]


@dataclass(frozen=True)
class RunFields:
    """The run whose code is logging (set around each attempt by the runtime)."""

    run_id: str
    workflow: str
    attempt: int


RUN: Final[contextvars.ContextVar[RunFields | None]] = contextvars.ContextVar(
    "tether_run", default=None
)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, and the run and trace ids."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        run = RUN.get()
        if run is not None:
            out["workflow"] = run.workflow
            out["attempt"] = run.attempt
            if record.levelno < logging.INFO:
                out["run_id"] = run.run_id
        trace_id = tracing.current_trace_id()
        if trace_id is not None:
            out["trace_id"] = trace_id
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        return orjson.dumps(out).decode()


def formatter(fmt: LogFormat) -> logging.Formatter:
    return JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT)


def configure(level: str, fmt: LogFormat = "text", audit_path: Path | None = None) -> None:
    """Log our records at `level` to stderr in `fmt`; with `audit_path`, the audit stream goes
    to that file (same format) instead of stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(handler)
    else:  # keep what the host set up; only make its handlers speak our format
        for existing in root.handlers:
            existing.setFormatter(formatter(fmt))
    root.setLevel(level)
    if audit_path is not None:
        audit = logging.getLogger(AUDIT_LOGGER)
        file_handler = logging.FileHandler(audit_path, encoding="utf-8")
        file_handler.setFormatter(formatter(fmt))
        audit.addHandler(file_handler)
        audit.propagate = False
