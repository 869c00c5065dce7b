"""The rules every registration of a `ctx` function follows (a workflow, an update, a plain
tool): the name it is registered under, and its signature, `async def fn(ctx)` or
`async def fn(ctx, input: Model) -> Out`, whose annotations give its input and output types."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, get_type_hints

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,99}$")


def check_name(name: str, what: str, fn: object = None) -> str:
    """`name`, once it fits the name rule of a `what` (`workflow`, `update`, `tool`) registered
    for `fn`. Raises ValueError."""
    # A protocol or a DAG is named by its own loader's rule (a protocol's id; a DAG's name,
    # which Dagu lets start with a digit and hold dots): the workflow-name rule is waived.
    own = getattr(fn, "realm_id", None) == name or getattr(fn, "dag_name", None) == name
    if not _NAME.match(name) and not own:
        raise ValueError(
            f"invalid {what} name {name!r}: a letter, then letters, digits, '_' or '-' (max 100)"
        )
    return name


def param_and_return(fn: Callable[..., Any], what: str) -> tuple[Any, Any]:
    """The input and output types of `fn`, registered as a `what`: its `input` parameter's
    annotation (`NoneType` when it takes only `ctx`) and its return annotation (`Any` where
    either is missing). Raises TypeError: `fn` is not `async`, does not take `(ctx)` or
    `(ctx, input)`, or its annotations cannot be resolved."""
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"{what} {fn.__qualname__} must be an async function")
    params = list(inspect.signature(fn).parameters.values())
    if len(params) not in (1, 2):
        raise TypeError(f"{what} {fn.__qualname__} must take (ctx) or (ctx, input)")
    try:
        hints = get_type_hints(fn)
    except NameError as exc:
        raise TypeError(
            f"cannot resolve the annotations of {what} {fn.__qualname__}: {exc}; "
            "define its input and output models at module level"
        ) from exc
    input_type = hints.get(params[1].name, Any) if len(params) == 2 else type(None)
    return input_type, hints.get("return", Any)
