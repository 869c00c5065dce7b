"""Settings written in JSON: the text itself or the file it names (runtime/json_or_file.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.runtime import json_or_file


def parse(raw: str | bytes) -> dict[str, int]:
    loaded: dict[str, int] = json.loads(raw)
    return loaded


class Refused(ValueError):
    pass


def test_inline_json_and_empty_text_each_read() -> None:
    """Our choice: text starting with `{` is the JSON, and blank text (surrounding spaces
    trimmed) the empty value."""
    assert json_or_file.read(' {"a": 1} ', parse, dict[str, int](), "numbers") == {"a": 1}
    assert json_or_file.read("  ", parse, {"none": 0}, "numbers") == {"none": 0}


def test_a_path_is_read_as_the_json_file_it_names(tmp_path: Path) -> None:
    """Our choice: a value that is not JSON text names a file holding the JSON."""
    path = tmp_path / "numbers.json"
    path.write_text('{"b": 2}', encoding="utf-8")
    assert json_or_file.read(f" {path} ", parse, dict[str, int](), "numbers") == {"b": 2}


def test_what_the_parser_raises_passes_through() -> None:
    """Our choice: the reader adds nothing to the parser's own error for bad JSON."""
    with pytest.raises(json.JSONDecodeError):
        json_or_file.read("{not json", parse, dict[str, int](), "numbers", Refused)


def test_an_unreadable_file_raises_the_given_error_without_the_value(tmp_path: Path) -> None:
    """Our choice: the error names the kind of file, never the value (it may be a mistyped
    secret)."""
    missing = str(tmp_path / "s3cr3t-value")
    with pytest.raises(Refused) as refused:
        json_or_file.read(missing, parse, dict[str, int](), "numbers", Refused)
    assert "cannot read it as a numbers file" in str(refused.value)
    assert "s3cr3t-value" not in str(refused.value)


def test_an_unreadable_file_raises_value_error_by_default(tmp_path: Path) -> None:
    """Our choice: without an error class the reader raises ValueError, which a pydantic
    validator reports as the field's error."""
    with pytest.raises(ValueError, match="cannot read it as a numbers file"):
        json_or_file.read(str(tmp_path / "absent"), parse, dict[str, int](), "numbers")
