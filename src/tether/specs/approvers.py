"""Who may decide an approval, as data: approvers' and roles' names, and a quorum. Pure.

An approval may be decided by several people (runtime/votes.py): `approvers` names them, or a
role does (its members are the server's `TETHER_APPROVER_ROLES`), and `quorum` says how many
different approvers must approve. These rules are the same for a workflow's
`ctx.approval(approvers=…, quorum=…)` and a DAG's `approval: {approvers, quorum}`, so both
refuse the same mistakes with the same words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

_NAME: Final = re.compile(r"^[^\x00-\x1f\x7f,]{1,200}$")
_ROLE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: The most approvers one approval may name.
MAX_APPROVERS: Final = 100


def check_voter(name: object) -> str:
    """An approver's name. Raises ValueError when it is not one (1-200 characters, no control
    characters, no comma, no surrounding spaces)."""
    if not isinstance(name, str) or not _NAME.match(name) or name != name.strip():
        raise ValueError(
            f"approver {name!r} must be 1-200 characters without control characters, commas "
            "or surrounding spaces"
        )
    return name


def check_role(role: object) -> str:
    """A role's name. Raises ValueError when it is not one (1-64 letters, digits, `_`, `.`,
    `-`, starting with a letter or digit)."""
    if not isinstance(role, str) or not _ROLE.match(role):
        raise ValueError(
            f"role {role!r} must be 1-64 letters, digits, '_', '.' or '-', starting with a "
            "letter or digit"
        )
    return role


def check_quorum(quorum: object) -> int:
    """A quorum: a whole number from 1. Raises ValueError."""
    if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 1:
        raise ValueError(f"quorum must be a whole number from 1, not {quorum!r}")
    return quorum


def check_approvers(names: Sequence[object], quorum: int) -> tuple[str, ...]:
    """Named approvers for a quorum. Raises ValueError: none named, more than
    `MAX_APPROVERS`, a name twice or one that is not a name, or fewer names than `quorum`."""
    checked = tuple(check_voter(n) for n in names)
    if not checked:
        raise ValueError("approvers must name at least one person (or be a role)")
    if len(checked) > MAX_APPROVERS:
        raise ValueError(f"approvers may name at most {MAX_APPROVERS} people")
    if len(set(checked)) != len(checked):
        raise ValueError(f"approvers names someone twice: {list(checked)}")
    if quorum > len(checked):
        raise ValueError(f"quorum {quorum} is more than the {len(checked)} approvers named")
    return checked
