"""What the official suite's fixtures say and ask: content blocks, input requests (elicitation,
sampling, roots), reading answers, and the JSON Schema 2020-12 fixture's schema."""

from __future__ import annotations

import base64
from typing import Any

from tether.tools.context import ToolContext

# A 1x1 PNG and a tiny WAV, base64.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
    "rkJggg=="
)
WAV = base64.b64encode(
    b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80\x3e\x00\x00"
    b"\x02\x00\x10\x00data\x00\x00\x00\x00"
).decode()


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


EMBEDDED = {
    "type": "resource",
    "resource": {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    },
}


def elicit(message: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": props, "required": required},
        },
    }


def sample(prompt: str, max_tokens: int) -> dict[str, Any]:
    return {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens,
        },
    }


ROOTS = {"method": "roots/list", "params": {}}


def accepted(ctx: ToolContext, key: str) -> dict[str, Any] | None:
    """The content of an accepted elicitation answer for `key`, if there is one."""
    answer = ctx.input_responses.get(key)
    if isinstance(answer, dict) and answer.get("action") == "accept":
        content = answer.get("content")
        return content if isinstance(content, dict) else {}
    return None


def sample_text(answer: Any) -> str:
    content = answer.get("content") if isinstance(answer, dict) else None
    if isinstance(content, dict):
        return str(content.get("text", ""))
    if isinstance(content, list) and content and isinstance(content[0], dict):
        return str(content[0].get("text", ""))
    return ""


NAME_FORM = elicit("What is your name?", {"name": {"type": "string"}}, ["name"])
CONFIRM = elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])

JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
