"""The App's MCP primitives besides its workflows (mixed into `App`): plain tools, prompts and
resources, registered with `app.tool(...)`, `app.prompt(...)` and `app.resource(...)`. None of
them is durable: each runs inline when a client asks for it, and nothing of it is recorded."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import TypeAdapter

from tether.runtime.registration_rules import check_name, param_and_return

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


@dataclass(frozen=True)
class ToolDef:
    """A plain (not durable) MCP tool: `async def fn(ctx, args: Model) -> Any`. The MCP layer
    decides what `ctx` offers; the runtime only keeps the registration."""

    name: str
    fn: Callable[..., Awaitable[Any]]
    takes_input: bool
    input_adapter: TypeAdapter[Any]
    description: str | None
    title: str | None
    annotations: dict[str, Any] | None
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None

    def schema(self) -> dict[str, Any]:
        if self.input_schema is not None:
            return self.input_schema
        schema = self.input_adapter.json_schema()
        return schema if schema.get("type") == "object" else {"type": "object"}


@dataclass(frozen=True)
class PromptDef:
    """An MCP prompt: `async def fn(ctx, arguments: dict[str, str]) -> dict` returning a
    GetPromptResult body (`messages`, optional `description`)."""

    name: str
    fn: Callable[..., Awaitable[dict[str, Any]]]
    description: str | None
    arguments: tuple[dict[str, Any], ...]
    completions: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class ResourceDef:
    """An MCP resource (or URI template with `{name}` parts): `async def fn(ctx, uri,
    **parts) -> list[dict]` returning its contents."""

    uri: str
    name: str
    fn: Callable[..., Awaitable[list[dict[str, Any]]]]
    description: str | None
    mime_type: str | None
    template: bool


class PrimitiveCatalog:
    """Mixed into `App`; keeps its plain tools, prompts and resources by name."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolDef] = {}
        self.prompts: dict[str, PromptDef] = {}
        self.resources: dict[str, ResourceDef] = {}

    @property
    def tools(self) -> Mapping[str, ToolDef]:
        return MappingProxyType(self._tools)

    def prompt(
        self,
        name: str,
        *,
        description: str | None = None,
        arguments: list[dict[str, Any]] | None = None,
        completions: dict[str, list[str]] | None = None,
    ) -> Callable[[F], F]:
        """Register an MCP prompt, as a decorator of `async def fn(ctx, arguments)`.

        The function gets the MCP request's context (its contents are not part of the public
        API) and the client's `arguments` as `dict[str, str]`, and returns the body of a
        `prompts/get` result: `messages` and an optional `description`.

        Args:
            name: The prompt's name in `prompts/list` and `prompts/get`.
            description: Shown in `prompts/list` (default: the function's docstring).
            arguments: The prompt's arguments as MCP lists them: `{"name", "description",
                "required"}` objects; a `prompts/get` missing a required one is refused.
            completions: Per argument name, the values `completion/complete` offers (those
                starting with what the client typed).

        Returns:
            A decorator that registers the function and returns it unchanged.

        Raises:
            ValueError: A prompt of that name is already registered.
        """

        def register(func: F) -> F:
            if name in self.prompts:
                raise ValueError(f"prompt {name!r} is registered twice")
            self.prompts[name] = PromptDef(
                name,
                func,
                description or inspect.getdoc(func),
                tuple(arguments or ()),
                {k: tuple(v) for k, v in (completions or {}).items()},
            )
            return func

        return register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> Callable[[F], F]:
        """Register an MCP resource, as a decorator of `async def fn(ctx, uri, **parts)`.

        A URI with `{part}` placeholders is a resource template: a `resources/read` of a URI
        that matches it calls the function with each part as a keyword argument. The
        function gets the MCP request's context (its contents are not part of the public API)
        and returns the read's `contents`: a list of `{"uri", "mimeType", "text"}` (or
        `"blob"`) objects.

        Args:
            uri: The resource's URI, or a URI template with `{part}` placeholders.
            name: Its name in `resources/list` (default: the function's name).
            description: Shown in the listing (default: the function's docstring).
            mime_type: The `mimeType` the listing announces.

        Returns:
            A decorator that registers the function and returns it unchanged.

        Raises:
            ValueError: A resource with that URI is already registered.
        """

        def register(func: F) -> F:
            if uri in self.resources:
                raise ValueError(f"resource {uri!r} is registered twice")
            self.resources[uri] = ResourceDef(
                uri,
                name or func.__name__,
                func,
                description or inspect.getdoc(func),
                mime_type,
                "{" in uri,
            )
            return func

        return register

    def tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        title: str | None = None,
        annotations: dict[str, Any] | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Register a plain MCP tool, as a decorator of `async def fn(ctx)` or
        `async def fn(ctx, args: Model)`.

        A plain tool runs inline when it is called, and nothing of it is recorded: it suits a
        quick answer; long or fallible work belongs in a workflow. `ctx` is a
        [`ToolContext`][tether.ToolContext]; `args` are validated against the annotated model
        first (a refused call runs nothing). A returned dict with `content` (or `resultType`)
        is the tool's result as it stands; any other value becomes its text. Raise
        [`ToolError`][tether.ToolError] to answer with a tool error (`isError: true`).

        Args:
            name: The tool's name (default: the function's name).
            description: The tool's description (default: the function's docstring).
            title: The tool's human-readable `title`.
            annotations: The tool's MCP `annotations` (`readOnlyHint`, ...), as given.
            input_schema: The published `inputSchema` (default: the argument model's schema).
            output_schema: The published `outputSchema` (default: none).

        Returns:
            A decorator that registers the function and returns it unchanged.

        Raises:
            ValueError: The name is not a valid tool name, or a tool of that name is
                already registered.
            TypeError: The function is not `async`, or does not take `(ctx)` or
                `(ctx, args)`, or its annotations cannot be resolved.
        """

        def register(func: F) -> F:
            tool_name = check_name(name or func.__name__, "tool")
            if tool_name in self._tools:
                raise ValueError(f"tool {tool_name!r} is registered twice")
            input_type, _ = param_and_return(func, "tool")
            self._tools[tool_name] = ToolDef(
                name=tool_name,
                fn=func,
                takes_input=input_type is not type(None),
                input_adapter=TypeAdapter(input_type if input_type is not type(None) else Any),
                description=description or inspect.getdoc(func),
                title=title,
                annotations=annotations,
                input_schema=input_schema,
                output_schema=output_schema,
            )
            return func

        return register
