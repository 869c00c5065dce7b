"""What a notification says, per channel: the webhook's JSON body, the Slack message (Block
Kit), the email. Pure: a claimed outbox row and its links in, bytes or a message out.

The text of a wait (its prompt, its name) comes from workflow code or a stored spec; it is
escaped for Slack's markup (so it can neither mention a channel nor forge a link) and kept to
one line in an email subject.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from email.message import EmailMessage
from email.utils import format_datetime
from typing import Any, Final

import orjson

from tether.runtime.notify import signing
from tether.runtime.notify.links import Links, decisions
from tether.storage.outbox import Notification

#: The wait fields a notification carries (the descriptor's others are the run's business).
_WAIT_FIELDS: Final = (
    "key", "kind", "name", "prompt", "opened_at", "deadline", "inputs", "required", "choices",
    "schema",
)  # fmt: skip
_KIND_TITLES: Final[Mapping[str, str]] = {
    "approval": "Approval",
    "human_task": "Task",
    "signal": "Signal",
    "agent_step": "Agent step",
    "remote_input": "Remote question",
}
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]+")
_SLACK_TEXT_MAX: Final = 2900  # a section's text holds 3000 characters
_BUTTONS_MAX: Final = 5


def _wait(note: Notification) -> dict[str, Any]:
    wait = note.data.get("wait")
    if not isinstance(wait, dict):
        return {}
    return {k: wait[k] for k in _WAIT_FIELDS if k in wait}


def _run(note: Notification) -> dict[str, Any]:
    run = note.data.get("run")
    return dict(run) if isinstance(run, dict) else {"id": note.execution_id}


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def payload(note: Notification, links: Links) -> dict[str, Any]:
    """The notification as JSON: what a webhook receives, and what the other channels say."""
    body: dict[str, Any] = {
        "id": note.delivery_id,
        "type": note.event,
        "created_at": _iso(note.created_at),
        "run": _run(note),
    }
    wait = _wait(note)
    if wait:
        body["wait"] = wait
    answer = note.data.get("answer")
    if isinstance(answer, dict):
        body["answer"] = {k: v for k, v in answer.items() if v is not None}
    body["links"] = {
        "run": links.run(note.execution_id),
        "decisions": dict(links.decisions(note.execution_id, wait, note.recipient))
        if wait and note.event == "wait.opened"
        else {},
    }
    return body


def webhook_request(
    note: Notification, links: Links, secret: str, now: int
) -> tuple[bytes, dict[str, str]]:
    """The webhook's body and headers, signed at `now` (unix seconds)."""
    body = orjson.dumps(payload(note, links))
    headers = {
        "Content-Type": "application/json",
        signing.SIGNATURE_HEADER: signing.signature_header(secret, body, now),
        signing.DELIVERY_HEADER: note.delivery_id,
        signing.EVENT_HEADER: note.event,
    }
    return body, headers


def _one_line(text: Any, limit: int = 200) -> str:
    flat = _CONTROL.sub(" ", str(text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def headline(note: Notification) -> str:
    """One line saying what happened, for a Slack fallback text and an email subject."""
    run, wait = _run(note), _wait(note)
    what = f"{_KIND_TITLES.get(str(wait.get('kind')), 'Wait')} '{wait.get('name', '?')}'"
    workflow = run.get("workflow", "?")
    if note.event == "wait.opened":
        said = f"{what} is waiting for an answer ({workflow})"
    elif note.event == "wait.answered":
        answer = note.data.get("answer") or {}
        decision = answer.get("decision")
        by = answer.get("by")
        said = f"{what} was answered" + (f": {decision}" if decision else "")
        said += f" by {by} ({workflow})" if by else f" ({workflow})"
    elif note.event == "wait.expired":
        said = f"{what} expired unanswered ({workflow})"
    else:
        said = f"Run of {workflow} ended: {run.get('status', '?')}"
    return _one_line(said)


def _details(note: Notification) -> list[tuple[str, str]]:
    """Label and text pairs: the prompt, the inputs asked for, the deadline, the run."""
    wait, run = _wait(note), _run(note)
    rows: list[tuple[str, str]] = []
    if wait.get("prompt"):
        rows.append(("Asks", str(wait["prompt"])))
    if note.event == "wait.opened":
        inputs = wait.get("inputs") or []
        required = set(wait.get("required") or [])
        if inputs:
            shown = ", ".join(f"{i} (required)" if i in required else str(i) for i in inputs)
            rows.append(("Inputs", shown))
        elif wait.get("kind") in ("human_task", "signal", "agent_step", "remote_input"):
            fields = list((wait.get("schema") or {}).get("properties", {}))
            fields = [f for f in fields if f != "decision"]
            if fields:
                rows.append(("Fields", ", ".join(fields)))
        if wait.get("deadline"):
            rows.append(("Deadline", str(wait["deadline"])))
        if wait.get("key"):
            rows.append(("Key", str(wait["key"])))
    rows.append(("Run", f"{run.get('workflow', '?')} {run.get('id', note.execution_id)}"))
    return rows


# --- Slack -------------------------------------------------------------------------------------


def slack_escape(text: str) -> str:
    """Text as Slack shows it literally: `&`, `<` and `>` escaped (no mention, no link)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_text(text: str) -> str:
    escaped = slack_escape(text)
    return escaped if len(escaped) <= _SLACK_TEXT_MAX else escaped[: _SLACK_TEXT_MAX - 1] + "…"


def slack_message(note: Notification, links: Links) -> dict[str, Any]:
    """The Slack incoming-webhook body: fallback `text` and Block Kit `blocks`."""
    title = headline(note)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": f"*{label}*\n{_slack_text(text)}"}
                for label, text in _details(note)[:10]
            ],
        },
    ]
    wait = _wait(note)
    urls = (
        links.decisions(note.execution_id, wait, note.recipient)
        if wait and note.event == "wait.opened"
        else {}
    )
    buttons: list[dict[str, Any]] = []
    for decision in decisions(wait) if urls else ():
        url = urls.get(decision)
        if url is None:
            continue
        button: dict[str, Any] = {
            "type": "button",
            "text": {"type": "plain_text", "text": decision.replace("_", " ").capitalize()},
            "url": url,
            "action_id": f"tether-{decision}"[:255],
        }
        if decision in ("approve", "complete"):
            button["style"] = "primary"
        elif decision == "reject":
            button["style"] = "danger"
        buttons.append(button)
    page = links.run(note.execution_id)
    if not buttons and page is not None:
        buttons.append(
            {
                "type": "button",
                "text": {"type": "plain_text", "text": "Open run"},
                "url": page,
                "action_id": "tether-open",
            }
        )
    if buttons:
        blocks.append({"type": "actions", "elements": buttons[:_BUTTONS_MAX]})
    return {"text": slack_escape(title), "blocks": blocks}


# --- email -------------------------------------------------------------------------------------


def email_message(
    note: Notification, links: Links, sender: str, recipient: str, now: datetime
) -> EmailMessage:
    """The email to `recipient`: the headline as subject, the details and links as text."""
    message = EmailMessage()
    message["Subject"] = headline(note)
    message["From"] = sender
    message["To"] = recipient
    message["Date"] = format_datetime(now)
    message["Message-ID"] = f"<{note.delivery_id}@tether.invalid>"  # the same on every attempt
    message[signing.DELIVERY_HEADER] = note.delivery_id
    message[signing.EVENT_HEADER] = note.event
    lines = [headline(note), ""]
    lines += [f"{label}: {_CONTROL.sub(' ', text)}" for label, text in _details(note)]
    wait = _wait(note)
    urls = (
        links.decisions(note.execution_id, wait, recipient)
        if wait and note.event == "wait.opened"
        else {}
    )
    if urls:
        lines.append("")
        lines += [f"{d.replace('_', ' ').capitalize()}: {urls[d]}" for d in urls]
    elif (page := links.run(note.execution_id)) is not None:
        lines += ["", f"Open the run: {page}"]
    if note.event == "wait.opened" and wait.get("key"):
        lines += ["", f"Or answer it with: tether runs answer {note.execution_id} {wait['key']} …"]
    message.set_content("\n".join(lines) + "\n")
    return message
