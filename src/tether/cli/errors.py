"""The command line's own failures, each with its exit code (docs/cli.md lists them)."""

from __future__ import annotations

from typing import ClassVar, Final

FAILED: Final = 1  # the command failed
USAGE: Final = 2  # the command line or a setting is wrong
WAITING_FOR_INPUT: Final = 3  # `runs watch --until-wait`: the run waits for an answer
INTERRUPTED: Final = 130  # Ctrl-C (128 + SIGINT)


class CliError(Exception):
    """A failure the command reports as one line on stderr, with `exit_code`."""

    exit_code: ClassVar[int] = FAILED


class Usage(CliError, ValueError):
    """An argument or a setting is not what the command needs (exit 2)."""

    exit_code = USAGE


class Failed(CliError):
    """The command could not do what was asked (exit 1)."""
