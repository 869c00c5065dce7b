"""Where the `runs` commands print: JSON, a terminal (rich, in colour) or plain text."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson
from rich.console import Console, RenderableType

from tether.cli import render


class Output:
    """One command's output. `fancy` only on a terminal; plain text elsewhere."""

    def __init__(
        self, json: bool, file: TextIO | None = None, console: Console | None = None
    ) -> None:
        self.json = json
        self.file = file or sys.stdout
        self.fancy = not json and (self.file.isatty() or console is not None)
        self.console = console or Console(
            file=self.file,
            width=None if self.fancy else render.PLAIN_WIDTH,
            no_color=not self.fancy,
            highlight=False,
            soft_wrap=False,
        )

    @staticmethod
    def now() -> datetime:
        return datetime.now(UTC)

    def data(self, value: Any, *, line: bool = False) -> None:
        """A JSON value: indented, or one line per value (`line`, for streams)."""
        option = 0 if line else orjson.OPT_INDENT_2
        self.file.write(orjson.dumps(value, option=option).decode() + "\n")
        self.file.flush()

    def show(self, renderable: RenderableType) -> None:
        if self.fancy:
            self.console.print(renderable)
            return
        # plain text: no padding at the ends of lines, so diffs and greps see only the text
        with self.console.capture() as captured:
            self.console.print(renderable)
        lines = captured.get().splitlines()
        self.file.write("".join(line.rstrip() + "\n" for line in lines))
        self.file.flush()

    def fields(self, value: dict[str, Any]) -> None:
        """A small result (`status: accepted` …): JSON, or one `key: value` line each."""
        if self.json:
            self.data(value)
            return
        for key, item in value.items():
            text = item if isinstance(item, str) else orjson.dumps(item).decode()
            self.console.print(f"{key}: {text}", markup=False)
