"""`${NAME}` substitution and the variable scope of a step (pure functions).

Sources, lowest to highest precedence (as Dagu resolves them, without dotenv and secrets):
  1. the server's environment variables passed through to the DAG (an allow-list the
     operator sets, `TETHER_DAG_ENV_PASSTHROUGH`; none for an inline spec)
  2. parameters: named ones as `${NAME}`, every one as `$1`, `${1}` … by position
  3. the DAG's `env`, evaluated top to bottom (an entry may use params and earlier entries)
  4. the selected runtime profile's env
  5. outputs of upstream steps (`output:` variables, approval inputs), applied in
     `output_order` so a later-visited predecessor wins
  5b. the step's own `env`, evaluated top to bottom
  6. run values set by the runtime (DAG_RUN_ID, DAG_PUSHBACK_ITERATION, DAG_PUSHBACK …)
A reference to a missing name is left as written (the shell may still expand it). Text that
is expanded here in a shell's place (a comparison, a parameter's `eval`: `expand_plain`) also
reads `$NAME`, and a missing name as empty, as the shell would. Shell text written in the DAG
(a command written in such text, a step's `command` or shell `script`, a command
precondition) gets the values through its environment (`bind_references`), never as text to
parse; only text another program reads (a `python3` script) has values put in (`substitute`).
`${NAME.key[0].sub}` reads a path in NAME's JSON value (older Dagu's JSON references).
`${steps.<id>.outputs.<field>}` reads a human task's published outputs.
`${params.NAME}` and `${env.NAME}` (Dagu v2) read NAME as `${NAME}` does (so for a parameter,
an env entry or an output of the same name, higher in the precedence, wins).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from tether.specs.dag.model import EnvVar, Param
from tether.specs.dag.quoting import EXPANDS, SINGLE_QUOTED, dollar_quoting

_REF: Final = re.compile(
    r"\$\{(?:steps\.(?P<step>[A-Za-z0-9_-]+)\.outputs\.(?P<field>[A-Za-z][A-Za-z0-9_]*)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<path>(?:\.[A-Za-z0-9_-]+|\[[0-9]+\])*)"
    r"|(?P<pos>[1-9][0-9]*))\}|\$(?P<bare>[1-9])(?![0-9])"
)
_PATH_PART: Final = re.compile(r"\.([A-Za-z0-9_-]+)|\[([0-9]+)\]")
# `expand_plain`: an escaped character, a reference, or a shell's `$NAME`
_PLAIN: Final = re.compile(
    r"\\(?P<escaped>[$`\\])|" + _REF.pattern + r"|\$(?P<env>[A-Za-z_][A-Za-z0-9_]*)"
)
#: `bind_references`: the environment names it gives the values it binds.
BOUND_PREFIX: Final = "__DAG_REF_"


def substitute(
    text: str,
    scope: Mapping[str, str],
    positional: Sequence[str] = (),
    step_outputs: Mapping[str, Mapping[str, str]] | None = None,
    quote: Callable[[str], str] | None = None,
) -> str:
    """`text` with `${NAME}`, `${n}` / `$n` and `${steps.ID.outputs.F}` replaced; unknown kept.
    `quote`, when given, is applied to each value put in (not to a reference left as written).
    """

    def replace(match: re.Match[str]) -> str:
        found = _value(match, scope, positional, step_outputs)
        if found is None:
            return match[0]
        return found if quote is None else quote(found)

    return _REF.sub(replace, text)


def expand_plain(
    text: str,
    scope: Mapping[str, str],
    positional: Sequence[str] = (),
    step_outputs: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """`text` (plain text around command substitutions: `commands.pieces`) as a shell would
    read it between double quotes, without one: `${…}` references and `$NAME` put in (unset:
    empty, as a shell has them), `\\$`, `` \\` `` and `\\\\` read as the character. Any other
    `$` form (`$((…))`, `${X@P}`, `$$`) stays as written: nothing here is run."""

    def replace(match: re.Match[str]) -> str:
        if match["escaped"] is not None:
            return match["escaped"]
        if match["env"] is not None:
            return scope.get(match["env"], "")
        found = _value(match, scope, positional, step_outputs)
        return "" if found is None else found

    return _PLAIN.sub(replace, text)


def bind_references(
    text: str,
    scope: Mapping[str, str],
    step_outputs: Mapping[str, Mapping[str, str]] | None = None,
    *,
    positional: Sequence[str] | None = None,
) -> tuple[str, dict[str, str]]:
    """Shell text written in the DAG (a command, a script a POSIX shell runs, a command
    substitution) ready for a shell whose environment is `scope`: no value is put into it.

    Where the shell expands a reference (`quoting.dollar_quoting`), `${NAME}` stays, for the
    shell to read NAME from its environment, and so do `$1`, `${1}` … without `positional`
    (the shell's arguments are then the run's positional values). Each reference it cannot
    read itself (`${NAME.path}`, `${params.NAME}`, `${steps.ID.outputs.F}`, and `$1` …
    when `positional` holds the values) becomes `${<BOUND_PREFIX>n}`, returned with its
    value for the shell's environment (one variable per reference text).

    Between single quotes the shell reads `${NAME}` and `$1` as written, and they stay so (as
    Dagu leaves them); a reference only Tether reads is put in there by closing the quotes
    around it (`'"${<BOUND_PREFIX>n}"'`), as Dagu puts in its value. Wherever else the shell
    does not expand (after a backslash, in a comment, a quoted here-document, `$'…'`), and
    when it reads nothing, a reference stays as written."""
    if "$" not in text:
        return text, {}
    quoting = dollar_quoting(text)
    bound: dict[str, str] = {}
    names: dict[str, str] = {}

    def replace(match: re.Match[str]) -> str:
        where = quoting.get(match.start())
        at_position = match["name"] is None and match["step"] is None
        if where is None or (at_position and positional is None):
            return match[0]
        found = _value(match, scope, positional or (), step_outputs)
        if found is None or (match["name"] is not None and not match["path"]):
            return match[0]  # unknown, or a variable of the shell's environment
        if where == SINGLE_QUOTED and at_position:
            return match[0]  # a positional value between single quotes: read as written
        name = names.setdefault(match[0], f"{BOUND_PREFIX}{len(names)}")
        bound[name] = found
        read = "${" + name + "}"
        return read if where == EXPANDS else f"'\"{read}\"'"

    return _REF.sub(replace, text), bound


def _value(
    match: re.Match[str],
    scope: Mapping[str, str],
    positional: Sequence[str],
    step_outputs: Mapping[str, Mapping[str, str]] | None,
) -> str | None:
    """What the reference `match` reads, or None when it reads nothing."""
    if match["name"] is not None:
        if match["path"]:
            found = _json_path(scope.get(match["name"]), match["path"])
            if found is None and match["name"] in ("params", "env"):
                found = scope.get(match["path"][1:])  # Dagu v2's `${params.NAME}`, `${env.…}`
            return found
        return scope.get(match["name"])
    if match["step"] is not None:
        return (step_outputs or {}).get(match["step"], {}).get(match["field"])
    index = int(match["pos"] or match["bare"]) - 1
    return positional[index] if index < len(positional) else None


def _json_path(text: str | None, path: str) -> str | None:
    """`${NAME.a.b[0]}`: the value at `path` in NAME's JSON text (Dagu's JSON references),
    or None (the reference stays as written) when NAME is unset, not JSON, or lacks the path.
    Strings are inserted bare, numbers as Go prints them (`30`, `1.5`), the rest as JSON."""
    if text is None:
        return None
    try:
        value: Any = json.loads(text)
    except ValueError:
        return None
    for part in _PATH_PART.finditer(path):
        key, index = part.groups()
        if key is not None and isinstance(value, dict) and key in value:
            value = value[key]
        elif index is not None and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return None
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return json.dumps(value)


def bind_params(
    declared: Sequence[Param], given: Sequence[tuple[str | None, str]] = ()
) -> tuple[tuple[str, ...], dict[str, str]]:
    """Positional values and named values after applying a run's overrides to the defaults.

    `given` is a list of `(name, value)`: a named override replaces that parameter; an
    unnamed one replaces the parameter at its position among the unnamed overrides.

    Raises:
        ValueError: a named override that the DAG does not declare.
    """
    values, _ = _bind(declared, given)
    named = {p.name: values[p.position - 1] for p in declared if p.name is not None}
    return tuple(values), named


def supplied_positions(
    declared: Sequence[Param], given: Sequence[tuple[str | None, str]] = ()
) -> frozenset[int]:
    """The 0-based positions whose values `given` sets (as `bind_params` applies it).

    Raises:
        ValueError: a named override that the DAG does not declare.
    """
    return frozenset(_bind(declared, given)[1])


def _bind(
    declared: Sequence[Param], given: Sequence[tuple[str | None, str]]
) -> tuple[list[str], set[int]]:
    values = [p.default for p in declared]
    names = {p.name: p.position - 1 for p in declared if p.name is not None}
    position, supplied = 0, set()
    for name, value in given:
        if name is None:
            if position < len(values):
                values[position] = value
            else:
                values.append(value)
            supplied.add(position)
            position += 1
        elif name in names:
            values[names[name]] = value
            supplied.add(names[name])
        else:
            raise ValueError(f"unknown parameter {name!r}")
    return values, supplied


def evaluate_env(
    env: Iterable[EnvVar], base: Mapping[str, str], positional: Sequence[str] = ()
) -> dict[str, str]:
    """`base` extended by the DAG's env entries, each substituted with what is known so far."""
    scope = dict(base)
    for var in env:
        scope[var.name] = substitute(var.value, scope, positional)
    return scope


def step_scope(
    inherited: Mapping[str, str],
    params: Mapping[str, str],
    env: Iterable[EnvVar],
    *,
    positional: Sequence[str] = (),
    profile: Mapping[str, str] | None = None,
    outputs: Iterable[Mapping[str, str]] = (),
    step_env: Sequence[EnvVar] = (),
    run_values: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The variables a step sees, layered in the documented precedence (later wins);
    `inherited`: what the run takes from the server's environment.

    `outputs` are the upstream steps' published variables in `output_order`; `step_env` the
    step's own `env`, evaluated top to bottom over all of those (run values stay protected).
    """
    scope = evaluate_env(env, {**inherited, **params}, positional)
    scope.update(profile or {})
    for published in outputs:
        scope.update(published)
    if step_env:
        scope = evaluate_env(step_env, scope, positional)
    scope.update(run_values or {})
    return scope


def split_params(given: str | list[str] | dict[str, str] | None) -> list[tuple[str | None, str]]:
    """Run parameters as `(name or None, value)` in the order given."""
    if given is None:
        return []
    if isinstance(given, dict):
        return list(given.items())
    items = given.split() if isinstance(given, str) else given
    out: list[tuple[str | None, str]] = []
    for item in items:
        name, sep, value = item.partition("=")
        out.append((name, value) if sep and name.isidentifier() else (None, item))
    return out
