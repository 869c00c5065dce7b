"""Every failure of a command as one line on stderr and an exit code (docs/cli.md): the
command line's own errors, bad settings, a missing database or App, the runtime's errors (a
"not found" says what was loaded and where), the database going away, files that cannot be
read, and anything unexpected. `--verbose` adds the traceback above the line.

| raised | exit | line |
|---|---|---|
| Usage, SettingsError | 2 | the argument or setting and what is wrong with it |
| NoDatabase | 1 | where the database was looked for |
| AppLoadError | 1 | which App, and the error in its module with its line |
| WorkflowNotFound | 1 | the name, and the App, DAGs and protocols the command loaded |
| ExecutionNotFound | 1 | the run id, and the database (and tenant) asked |
| Unavailable | 1 | the database that does not answer (never its password) |
| other TetherError | 1 | its class and message, then each violation indented |
| OSError | 1 | the system's reason and the file |
| anything else | 1 | `unexpected error:` its class and message |
"""

from __future__ import annotations

import sys
import traceback
from typing import Final, TextIO

from tether.cli.errors import FAILED, USAGE, CliError
from tether.cli.loaded import Loaded
from tether.database_url import NoDatabase, describe
from tether.loader import AppLoadError
from tether.runtime import errors
from tether.settings import SettingsError

LOST_PREFIX: Final = "database unavailable: "  # storage's words for a lost connection


def explain(exc: BaseException, loaded: Loaded | None) -> tuple[int, list[str]]:
    """The exit code, and the line (then any indented detail lines) that say what failed."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]  # a task group's one failure: say it as itself
    if isinstance(exc, CliError):
        return exc.exit_code, [str(exc)]
    if isinstance(exc, SettingsError):
        return USAGE, [str(exc)]
    if isinstance(exc, NoDatabase | AppLoadError):
        return FAILED, [str(exc)]
    if isinstance(exc, errors.TetherError):
        return FAILED, _tether_error(exc, loaded)
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc) or type(exc).__name__
        return FAILED, [f"{reason}: {exc.filename}" if exc.filename else reason]
    if isinstance(exc, ValueError):
        return FAILED, [str(exc)]
    return FAILED, [f"unexpected error: {type(exc).__name__}: {exc} (--verbose shows where)"]


def report(
    exc: BaseException, loaded: Loaded | None, *, verbose: bool, err: TextIO | None = None
) -> int:
    """Print `exc` as `explain` says (after its traceback when `verbose`); the exit code."""
    err = err or sys.stderr
    if verbose:
        traceback.print_exception(exc, file=err)
    code, lines = explain(exc, loaded)
    first, *rest = lines
    print(f"tether: {first}", file=err)
    for line in rest:
        print(f"  {line}", file=err)
    return code


def _tether_error(exc: errors.TetherError, loaded: Loaded | None) -> list[str]:
    kind = type(exc).__name__
    if loaded is not None and type(exc) is errors.WorkflowNotFound:
        return [f"{kind}: {loaded.not_found(exc.message)}"]
    if loaded is not None and isinstance(exc, errors.ExecutionNotFound):
        return [f"{kind}: {loaded.run_not_found()}"]
    if isinstance(exc, errors.Unavailable):
        return [f"{kind}: {_unavailable(exc, loaded)}"]
    return [f"{kind}: {exc.message}", *_violations(exc)]


def _unavailable(exc: errors.Unavailable, loaded: Loaded | None) -> str:
    settings = loaded.settings if loaded is not None else None
    where = describe(settings) if settings is not None else "the database"
    if exc.message != errors.Unavailable().message:  # a database error, not a lost connection
        return f"{where}: {exc.message}"
    cause = str(exc.__cause__ or "").removeprefix(LOST_PREFIX)
    return f"cannot reach {where}" + (f": {cause}" if cause else "") + "; is it running?"


def _violations(exc: errors.TetherError) -> list[str]:
    """Each violation as `field: message`, as the MCP surfaces return them."""
    out: list[str] = []
    for violation in getattr(exc, "errors", None) or []:
        if isinstance(violation, str):  # AnswerRejected: "field: message" already
            out.append(violation)
            continue
        where = ".".join(str(p) for p in violation.get("loc") or []) or "(root)"
        out.append(f"{where}: {violation.get('msg')}")
    return out
