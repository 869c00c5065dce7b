"""The `tether` command tree, in-process and pure: flags anywhere, choices, help everywhere,
one-line usage errors; and the settings error that names its variable."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from importlib import metadata

import pytest

from tether.cli import build_parser, main, parser
from tether.cli.quiet import log_level
from tether.runtime.statuses import STATUSES
from tether.settings import Settings, SettingsError


def commands(
    p: argparse.ArgumentParser, path: tuple[str, ...] = ("tether",)
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """Every subcommand: (words, its parser, its one-line help)."""
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name), sub, helps.get(name, "")
                yield from commands(sub, (*path, name))


@pytest.mark.parametrize(
    "argv",
    [
        ["--json", "runs", "list"],
        ["runs", "--json", "list"],
        ["runs", "list", "--json"],
    ],
)
def test_json_is_accepted_anywhere_on_the_command_line(argv: list[str]) -> None:
    """`--json` before or after the subcommand means the same."""
    args = build_parser().parse_args(argv)
    assert (args.command, args.action, args.json) == ("runs", "list", True)


def test_without_json_the_flag_is_off_and_app_is_unset() -> None:
    """No flag: plain output, and the App comes from TETHER_APP (our choice)."""
    args = build_parser().parse_args(["runs", "show", "ex_x"])
    assert (args.json, args.app, args.verbose, args.log_level) == (False, None, False, None)


def test_app_is_accepted_before_or_after_the_runs_action() -> None:
    early = build_parser().parse_args(["runs", "--app", "m:a", "list"])
    late = build_parser().parse_args(["runs", "list", "--app", "m:a"])
    assert early.app == late.app == "m:a"


def test_status_lists_every_status_as_its_choices() -> None:
    """`runs list --status` offers exactly the run statuses."""
    (ls,) = [p for words, p, _ in commands(build_parser()) if words[1:] == ("runs", "list")]
    (status,) = [a for a in ls._actions if "--status" in a.option_strings]
    assert tuple(status.choices or ()) == STATUSES


def test_every_subcommand_has_help_and_a_description() -> None:
    """`--help` on every subcommand says what it does."""
    for words, sub, help_text in commands(parser()):
        if words[-1] == "conformance":
            continue  # the harness's own parser
        assert help_text and sub.description, words


def test_an_unknown_log_level_is_a_one_line_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An invalid `--log-level` exits 2 with one line, not a traceback."""
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["--log-level", "LOUD", "runs", "list"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--log-level" in err and "LOUD" in err


def test_log_levels_are_case_insensitive() -> None:
    assert build_parser().parse_args(["runs", "list", "--log-level", "debug"]).log_level == "DEBUG"


def test_default_log_level_is_quiet_except_for_the_long_running_commands() -> None:
    """Short commands print only warnings; serve and worker say what they do (our choice)."""
    assert log_level("runs", None, verbose=False) == "WARNING"
    assert log_level("serve", None, verbose=False) == "INFO"
    assert log_level("runs", None, verbose=True) == "DEBUG"
    assert log_level("serve", "ERROR", verbose=True) == "ERROR"


def test_a_bad_setting_names_its_variable() -> None:
    """TETHER_PORT=eighty is one message naming the variable, not a pydantic error."""
    with pytest.raises(SettingsError, match=r"^TETHER_PORT=eighty: .*integer"):
        Settings.from_env({"TETHER_PORT": "eighty"})
    with pytest.raises(SettingsError, match=r"^--workers x"):
        Settings.from_env({}, workers="x")


def test_tether_app_is_a_setting() -> None:
    assert Settings.from_env({"TETHER_APP": "m:a"}).app == "m:a"
    assert Settings.from_env({"TETHER_APP": "m:a"}, app="n:b").app == "n:b"


def test_the_parser_is_an_argparse_parser() -> None:
    assert isinstance(parser(), argparse.ArgumentParser)


def test_version_prints_the_installed_distributions_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Our choice: `tether --version` prints the version the installed distribution declares
    (pyproject.toml takes it from `tether.__version__`) and exits 0."""
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"tether {metadata.version('tether')}\n"


def test_no_parser_takes_an_abbreviated_option(capsys: pytest.CaptureFixture[str]) -> None:
    """`serve --prot 8001` is an unknown option, not `--protocols 8001` (our choice: a prefix
    that works today could silently mean another option once one is added)."""
    for words, sub, _ in commands(build_parser()):
        if words[-1] != "conformance":  # the harness's own parser: tested below
            assert sub.allow_abbrev is False, words
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["serve", "--prot", "8001"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --prot" in capsys.readouterr().err


def test_the_conformance_harness_takes_no_abbreviated_option() -> None:
    """`tether conformance --ur X` is refused, not read as `--url X`."""
    from tether.conformance.cli import parser as harness

    with pytest.raises(SystemExit):
        harness().parse_args(["--ur", "http://127.0.0.1:1/mcp"])
