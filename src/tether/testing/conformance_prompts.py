"""The official suite's prompt and resource fixtures, registered on the conformance App by
`register` (tether.testing.conformance calls it after its tools)."""

from __future__ import annotations

from typing import Any

import orjson

from tether.jsonrpc.router import RequestContext
from tether.runtime.registry import App
from tether.testing.conformance_content import PNG, elicit
from tether.tools.context import InputRequired


async def simple_prompt(ctx: RequestContext, args: dict[str, str]) -> dict[str, Any]:
    return {
        "messages": [
            {
                "role": "user",
                "content": {"type": "text", "text": "This is a simple prompt for testing."},
            }
        ]
    }


async def prompt_with_arguments(ctx: RequestContext, args: dict[str, str]) -> dict[str, Any]:
    return {
        "messages": [
            {
                "role": "user",
                "content": {
                    "type": "text",
                    "text": f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'",
                },
            }
        ]
    }


async def prompt_with_resource(ctx: RequestContext, args: dict[str, str]) -> dict[str, Any]:
    return {
        "messages": [
            {
                "role": "user",
                "content": {
                    "type": "resource",
                    "resource": {
                        "uri": args["resourceUri"],
                        "mimeType": "text/plain",
                        "text": "Embedded resource content for testing.",
                    },
                },
            },
            {
                "role": "user",
                "content": {"type": "text", "text": "Please process the embedded resource above."},
            },
        ]
    }


async def prompt_with_image(ctx: RequestContext, args: dict[str, str]) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}},
            {
                "role": "user",
                "content": {"type": "text", "text": "Please analyze the image above."},
            },
        ]
    }


async def prompt_needing_input(ctx: RequestContext, args: dict[str, str]) -> dict[str, Any]:
    responses = ctx.params.get("inputResponses") or {}
    answer = responses.get("user_context") if isinstance(responses, dict) else None
    content = answer.get("content") if isinstance(answer, dict) else None
    if not isinstance(content, dict) or "context" not in content:
        raise InputRequired(
            {
                "user_context": elicit(
                    "What context should the prompt use?",
                    {"context": {"type": "string"}},
                    ["context"],
                )
            }
        )
    return {
        "messages": [
            {
                "role": "user",
                "content": {"type": "text", "text": f"Use this context: {content['context']}"},
            }
        ]
    }


async def static_text(ctx: RequestContext, uri: str) -> list[dict[str, Any]]:
    return [
        {
            "uri": uri,
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource.",
        }
    ]


async def static_binary(ctx: RequestContext, uri: str) -> list[dict[str, Any]]:
    return [{"uri": uri, "mimeType": "image/png", "blob": PNG}]


async def template_data(ctx: RequestContext, uri: str, id: str) -> list[dict[str, Any]]:
    body = {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}
    return [{"uri": uri, "mimeType": "application/json", "text": orjson.dumps(body).decode()}]


def register(app: App) -> None:
    """Add every prompt and resource fixture to `app`, in the suite's order."""
    app.prompt("test_simple_prompt", description="A simple prompt without arguments")(simple_prompt)
    app.prompt(
        "test_prompt_with_arguments",
        description="A prompt with two required arguments",
        arguments=[
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
        completions={"arg1": ["paris", "park", "party", "test", "testing"]},
    )(prompt_with_arguments)
    app.prompt(
        "test_prompt_with_embedded_resource",
        description="A prompt that embeds a resource",
        arguments=[
            {"name": "resourceUri", "description": "URI of the resource to embed", "required": True}
        ],
    )(prompt_with_resource)
    app.prompt("test_prompt_with_image", description="A prompt with an image")(prompt_with_image)
    app.prompt(
        "test_input_required_result_prompt", description="A prompt that needs context first"
    )(prompt_needing_input)
    app.resource(
        "test://static-text",
        name="static-text",
        description="A static text resource",
        mime_type="text/plain",
    )(static_text)
    app.resource(
        "test://static-binary",
        name="static-binary",
        description="A static binary resource",
        mime_type="image/png",
    )(static_binary)
    app.resource(
        "test://template/{id}/data",
        name="template-data",
        description="Data for an id",
        mime_type="application/json",
    )(template_data)
