"""One verdict of the harness: `Check` (id, status, message, spec reference, details)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "fail", "warn", "skip"]
#: How bad each status is, for merging two verdicts on one check.
SEVERITY: Mapping[Status, int] = {"skip": 0, "pass": 1, "warn": 2, "fail": 3}


@dataclass(frozen=True)
class Check:
    """One verdict: the check id, its status, a one-line message, the spec reference, and the
    details that decided it (the request/response exchanges among them)."""

    id: str
    status: Status
    message: str
    spec_ref: str
    scenario: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)

    def worse(self, other: Check) -> Check:
        """The more severe of two verdicts on the same check (the first on a tie)."""
        return other if SEVERITY[other.status] > SEVERITY[self.status] else self
