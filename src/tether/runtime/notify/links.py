"""Links in a notification: the run's page, and one link per decision a wait offers. Pure.

This is the one seam that says where a person goes to answer: `Links.decisions(run_id, wait,
recipient)` returns `{decision: url}` for the wait as announced, per recipient (an email
address, or '' for a channel that sends one message), so links signed for one approver can
replace these without touching the channels. `ConsoleLinks` links every decision to the
console's page of the run, where the wait is answered after signing in; `SignedLinks` gives a
person their own signed approval link per decision (runtime/links.py) wherever one can be
made for them, and the console's page elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import quote

from tether.runtime import answer_rules
from tether.runtime.links import LinkMinter, LinkRefused

#: The one decision of a wait that is answered with a value, not a choice (a signal, an
#: agent step).
ANSWER: Final = "answer"


def decisions(wait: Mapping[str, Any]) -> tuple[str, ...]:
    """The decisions a wait offers: an approval's (its own choices when it lists them), a
    human task's, or the one `answer`."""
    kind = wait.get("kind")
    if kind == "approval":
        choices = wait.get("choices")
        if isinstance(choices, list) and choices and all(isinstance(c, str) for c in choices):
            return tuple(choices)
        return answer_rules.APPROVAL_DECISIONS
    if kind == "human_task":
        return answer_rules.HUMAN_TASK_DECISIONS
    return (ANSWER,)


class Links(Protocol):
    """Where the people a notification reaches go: the run's page and each decision's link."""

    def run(self, run_id: str) -> str | None:
        """The run's page, or None when there is none to link to."""
        ...

    def decisions(self, run_id: str, wait: Mapping[str, Any], recipient: str) -> Mapping[str, str]:
        """`{decision: url}` for the wait as announced, for `recipient`."""
        ...


@dataclass(frozen=True)
class NoLinks:
    """No public address is configured: messages carry no links."""

    def run(self, run_id: str) -> str | None:
        return None

    def decisions(self, run_id: str, wait: Mapping[str, Any], recipient: str) -> Mapping[str, str]:
        return {}


@dataclass(frozen=True)
class ConsoleLinks:
    """Every decision links to the run's page in the console: `base_url` (how people reach
    the server, e.g. `https://tether.example.com`) + `path` + the run id."""

    base_url: str
    path: str = "/console/runs/"

    def run(self, run_id: str) -> str | None:
        return f"{self.base_url.rstrip('/')}{self.path}{quote(run_id, safe='')}"

    def decisions(self, run_id: str, wait: Mapping[str, Any], recipient: str) -> Mapping[str, str]:
        page = self.run(run_id)
        return dict.fromkeys(decisions(wait), page) if page is not None else {}


@dataclass(frozen=True)
class SignedLinks:
    """Each decision of an approval or human task links to a signed approval link made for
    the recipient (an email address: the person it names, in the run's history and the audit
    trail), which decides it without a sign-in; where none can be made — a channel that
    sends one message (`recipient` ''), a signal or agent step, a recipient the approval's
    approvers do not name — the decision links to the console's page of the run."""

    console: ConsoleLinks
    minter: LinkMinter

    def run(self, run_id: str) -> str | None:
        return self.console.run(run_id)

    def decisions(self, run_id: str, wait: Mapping[str, Any], recipient: str) -> Mapping[str, str]:
        if recipient and "key" in wait:
            try:
                return self.minter.links(wait, recipient)
            except LinkRefused:
                pass
        return self.console.decisions(run_id, wait, recipient)
