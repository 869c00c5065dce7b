"""Input the store cannot hold, whatever a step or workflow asks of it (pure): JSON over the
server's payload limit (`TETHER_MAX_PAYLOAD_BYTES`), or text holding the NUL character, which
PostgreSQL cannot store. Such input is refused before its content is read, with what is
wrong, so an agent's answer refused this way is not a refused answer and spends none of the
step's budget (exhaustion.py)."""

from __future__ import annotations

from typing import Any, Final

from tether.runtime import errors as rt
from tether.tools.realm.envelope import Reply, refusal

TOO_LARGE: Final = "RESOURCE_TOO_LARGE"
UNSTORABLE_TEXT: Final = "VALIDATION_UNSTORABLE_TEXT"
SETTING: Final = "TETHER_MAX_PAYLOAD_BYTES"


def problem(exc: rt.AnswerUnstorable, what: str) -> tuple[str, str, dict[str, Any]]:
    """The code, the sentence (`<what> is …`) and the `error_details` of a refusal."""
    if exc.limit_bytes is not None:
        said = (
            f"{what} is {exc.size_bytes} bytes, over this server's limit of {exc.limit_bytes} "
            f"bytes ({SETTING})"
        )
        return TOO_LARGE, said, {"limit_bytes": exc.limit_bytes, "size_bytes": exc.size_bytes}
    where = f" at '{exc.nul_at}'" if exc.nul_at else ""
    said = f"{what} holds the NUL character (U+0000){where}, which cannot be stored"
    return UNSTORABLE_TEXT, said, {"character": "U+0000", "at": exc.nul_at or ""}


def refused(
    command: str,
    run_id: str,
    exc: rt.AnswerUnstorable,
    what: str,
    *,
    then: str = "",
    run_version: int | None = 0,
    **extra: Any,
) -> Reply:
    """The refusal: `provide_input`, nothing recorded (`then`: a sentence more)."""
    code, said, details = problem(exc, what)
    return refusal(
        command,
        run_id,
        code,
        f"{said}. Nothing was recorded.{f' {then}' if then else ''}",
        run_version=run_version,
        error_details=details,
        **extra,
    )
