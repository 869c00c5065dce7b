"""The waits a protocol run opens: an agent step's answer (`AgentAnswer`) and a person's choice
at a gate (`GateWait`). Their descriptors are what every surface sees and answers against."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from tether.runtime import waits
from tether.runtime.realm.failures import exhausted_marker


@dataclass(frozen=True)
class AgentAnswer(waits.WaitSpec):
    """An agent step's wait: the answer is any JSON fitting the step's JSON schema (checked by
    `answer_rules.validate_answer` from the descriptor before it is delivered)."""

    kind: ClassVar[str] = "agent_step"
    json_schema: Mapping[str, Any] | None = None
    input_schema: Mapping[str, Any] | None = None

    def answer_schema(self) -> dict[str, Any]:
        return dict(self.json_schema or {"type": "object"})

    def extra(self) -> dict[str, Any]:
        return {"step": self.name, "input_schema": dict(self.input_schema or {})}

    def parse(self, response: Any, by: str | None) -> Any:
        if (detail := exhausted_marker(response, by)) is not None:
            return Spent(detail)
        return response


@dataclass(frozen=True)
class Spent:
    """An agent step's answer that says its refused answers spent its budget (the interpreter
    decides whether that failure ends the run)."""

    detail: str


@dataclass(frozen=True)
class GateWait(waits.WaitSpec):
    """A protocol gate: an approval wait whose `decision` is one of the gate's `choices`."""

    kind: ClassVar[str] = "approval"
    choices: tuple[str, ...] = ("approve", "reject")
    preview: Any = None
    agent_hint: str | None = None
    on_expiry: str | None = None
    default_choice: str | None = None
    # A gate's `timeout_seconds` with no `on_expiry`: its time is shown and reported once it
    # has passed, and nothing is carried out (the wait has no deadline).
    expires_after_s: float | None = None

    def answer_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"decision": {"type": "string", "enum": list(self.choices)}},
            "required": ["decision"],
        }

    def descriptor(self, key: str, opened_at: str, deadline: str | None) -> dict[str, Any]:
        """The wait's descriptor, with `expires_at`: its deadline, or for a gate that only
        reports its expiry, the time it was opened plus `expires_after_s`."""
        out = super().descriptor(key, opened_at, deadline)
        if deadline is None and self.expires_after_s is not None:
            opened = datetime.fromisoformat(opened_at)
            deadline = (opened + timedelta(seconds=self.expires_after_s)).isoformat()
        out["expires_at"] = deadline
        return out

    def extra(self) -> dict[str, Any]:
        return {
            "step": self.name,
            "choices": list(self.choices),
            "preview": self.preview,
            "agent_hint": self.agent_hint,
            "on_expiry": self.on_expiry,
            "default_choice": self.default_choice,
            "inputs": [],
            "required": [],
        }

    def parse(self, response: Any, by: str | None) -> Any:
        return {"choice": response["decision"], "resolved_by": "human", "by": by}
