"""What a DAG run takes from the server's environment: an explicit allow-list, and nothing
for an inline spec.

A stored DAG (a file, or YAML text the app registers) reads only the process variables the
operator passes through (`TETHER_DAG_ENV_PASSTHROUGH`; by default `DEFAULT_PASSTHROUGH`, so a
Dagu file that reads `$HOME` or `${PATH}` keeps working): they are the lowest source of its
`${NAME}` references and the environment of the processes it starts. An inline spec (sent by
an MCP client) reads none of them: its `${PATH}` stays as written. When the operator lets
inline specs run shell (`TETHER_INLINE_SHELL`), their processes get `PATH` alone (when it is
passed through at all), so commands are found where the operator's are; that value is
never one of the spec's variables. No `TETHER_*` variable reaches any DAG: such a name is
refused in the allow-list, and skipped when the environment is read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from tether.specs.dag.values import NAME_RE

#: The process variables a stored DAG sees unless the operator says otherwise: where programs
#: are, whose they are, and how text, time and temporary files are to be handled. None of them
#: names a credential.
DEFAULT_PASSTHROUGH: Final = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
)
#: The server's own settings (database URL, keys, tokens): never a DAG's.
RESERVED_PREFIX: Final = "TETHER_"
#: A recorded spec's `origin` when it came inline (over MCP): it sees no server variable.
INLINE_ORIGIN: Final = "inline"
#: The one variable an inline spec's shell gets from the server (`TETHER_INLINE_SHELL`).
INLINE_SHELL_PROCESS: Final = ("PATH",)
_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})


def passthrough(names: Iterable[str]) -> frozenset[str]:
    """The allow-list `names` (blank entries dropped), checked.

    Raises:
        ValueError: a name that is not a variable name, or a `TETHER_*` name (the server's
            settings never reach a DAG).
    """
    kept = set()
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if not NAME_RE.fullmatch(name):  # a variable name, as a DAG's env names one
            raise ValueError(f"{name!r} is not an environment variable name")
        if name.upper().startswith(RESERVED_PREFIX):
            raise ValueError(f"{name}: the server's {RESERVED_PREFIX}* settings never reach a DAG")
        kept.add(name)
    return frozenset(kept)


def parse_passthrough(text: str) -> frozenset[str]:
    """`TETHER_DAG_ENV_PASSTHROUGH`: comma-separated names (`passthrough` says what it raises)."""
    return passthrough(text.split(","))


@dataclass(frozen=True)
class RunEnvironment:
    """What one run takes from the server's environment."""

    # Its lowest `${NAME}` source, and in the environment of every process it starts.
    variables: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    # In the environment of its processes only, under its variables (an inline spec's PATH).
    process: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


def run_environment(
    allowed: frozenset[str], *, inline: bool, environ: Mapping[str, str] | None = None
) -> RunEnvironment:
    """The variables of `environ` (default: this process's) that a run sees: the allowed ones
    for a stored DAG; for an inline spec none, and PATH for its processes alone."""
    source = os.environ if environ is None else environ
    names = allowed.intersection(INLINE_SHELL_PROCESS) if inline else allowed
    found = {
        name: source[name]
        for name in names
        if name in source and not name.upper().startswith(RESERVED_PREFIX)
    }
    return RunEnvironment(process=found) if inline else RunEnvironment(variables=found)
