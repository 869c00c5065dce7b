"""MkDocs hook: render the CLI and settings reference from the code at build time.

A page that contains `<!-- tether:cli -->` gets the `tether` command tree, read from the
argparse parser in `tether.cli` (and the harness's own parser for `tether conformance`); a page
that contains `<!-- tether:settings -->` gets the `Settings` model from `tether.settings`, one
row per field with its `TETHER_*` variable, type, default and description. Nothing is copied
by hand, so the reference cannot drift from the code.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

CLI_MARKER = "<!-- tether:cli -->"
# What a setting means where its Field in tether/settings.py has no description yet; the code's
# own description wins, and tests/test_docs.py checks every key here is a real setting.
NOTES = {
    "shutdown_grace_s": "seconds a stopping worker lets its runs finish before handing their "
    "leases back",
    "janitor_interval_s": "how often the retention janitor deletes ended runs past their retention",
    "pool_size": "PostgreSQL connections per process",
    "max_payload_bytes": "largest input, signal or answer payload accepted, in bytes",
    "host": "address `tether serve` listens on",
    "port": "port `tether serve` listens on",
}
SETTINGS_MARKER = "<!-- tether:settings -->"


def on_page_markdown(markdown: str, **_: Any) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if SETTINGS_MARKER in markdown:
        markdown = markdown.replace(SETTINGS_MARKER, settings_reference())
    return markdown


# --- CLI -------------------------------------------------------------------------------------


def tether_parser() -> argparse.ArgumentParser:
    """The parser `tether` itself uses (whatever the module names its factory)."""
    from tether import cli

    for name in ("parser", "build_parser", "_parser"):
        factory = getattr(cli, name, None)
        if callable(factory):
            built = factory()
            if isinstance(built, argparse.ArgumentParser):
                return built
    raise RuntimeError("tether.cli exposes no argparse parser factory")


def conformance_parser() -> argparse.ArgumentParser:
    from tether.conformance.cli import parser

    return parser()


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("tether",)
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """Every command under `parser`, depth first: (words, its parser, its one-line help)."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        for name, sub in action.choices.items():
            words = (*path, name)
            if words == ("tether", "conformance"):
                sub = conformance_parser()  # `tether conformance ARGS` hands ARGS to it
            yield words, sub, helps.get(name, "")
            yield from commands(sub, words)


def _usage(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> str:
    """One-line usage, with the command spelled as a user types it."""
    usage = " ".join(parser.format_usage().split()).removeprefix("usage: ")
    return usage.replace(parser.prog, " ".join(words), 1)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _argument_rows(parser: argparse.ArgumentParser) -> Iterator[str]:
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        name = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest.upper()}`"
        if action.metavar:
            name = f"`{action.metavar}`" if not action.option_strings else name
        notes: list[str] = []
        if action.choices:
            notes.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
        if action.nargs == "?" or (not action.option_strings and action.default is not None):
            notes.append("optional")
        if action.required and action.option_strings:
            notes.append("required")
        if isinstance(action, argparse._AppendAction):
            notes.append("repeatable")
        default = action.default
        shown = (
            f"`{default}`"
            if default not in (None, False, argparse.SUPPRESS) and not isinstance(default, list)
            else ""
        )
        help_text = "; ".join([action.help or "", *notes]).strip("; ")
        yield f"| {name} | {_cell(help_text)} | {shown} |"


def cli_reference() -> str:
    root = tether_parser()
    out = [
        f"`{_usage(root, ('tether',))}`",
        "",
        _cell(root.description or ""),
        "",
        "| argument | meaning | default |",
        "| --- | --- | --- |",
        *_argument_rows(root),
        "",
    ]
    for words, sub, help_text in commands(root):
        out += [f"## `{' '.join(words)}`", ""]
        if help_text:
            out += [help_text[:1].upper() + help_text[1:] + ".", ""]
        if sub.description and sub.description != help_text:
            out += [sub.description, ""]
        out += ["```text", _usage(sub, words), "```", ""]
        rows = list(_argument_rows(sub))
        if rows:
            out += ["| argument | meaning | default |", "| --- | --- | --- |", *rows, ""]
    return "\n".join(out)


# --- settings --------------------------------------------------------------------------------


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return " or ".join(_type_name(a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return "unset"
    return getattr(annotation, "__name__", str(annotation))


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if value == "":
        return "empty"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    return f"`{value}`"


def _flags() -> set[str]:
    """Every option string of every `tether` command."""
    root = tether_parser()
    found = {o for a in root._actions for o in a.option_strings}
    for _, sub, _ in commands(root):
        found |= {o for a in sub._actions for o in a.option_strings}
    return found


def settings_reference(describe: Callable[[Any], str] = _type_name) -> str:
    from tether.settings import Settings

    flags = _flags()
    out = ["| variable | type | default | meaning |", "| --- | --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        meaning = field.description or NOTES.get(name, "")
        flag = "--" + name.replace("_", "-")
        if flag in flags:
            meaning += f" (the `{flag}` flag overrides it)"
        out.append(
            f"| `TETHER_{name.upper()}` | {describe(field.annotation)} "
            f"| {_default(field.default)} | {_cell(meaning.strip())} |"
        )
    return "\n".join(out) + "\n"
