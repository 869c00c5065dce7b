"""The JSON-RPC error tree drawn in `tether.jsonrpc.errors`' docstring is the tree of its
classes: same parents, codes and HTTP statuses, and no class left out (our rule: the tree is
drawn in the module docstring; this test keeps it true). Statuses come from codes.HTTP_STATUS
only (our choice: no class overrides it)."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

from tether.jsonrpc import codes
from tether.jsonrpc import errors as err

_ROW = re.compile(
    r"^(?P<indent>[ │]*)[├└]── (?P<name>\w+)\s+(?P<code>-\d+)\s+(?P<status>\d{3})\s+\S"
)


@dataclass(frozen=True)
class Row:
    name: str
    parent: str
    code: int
    status: int


def drawn_tree() -> list[Row]:
    """The rows of the docstring's tree, each with its parent by indentation."""
    doc = err.__doc__ or ""
    lines = doc.splitlines()
    root = next(i for i, line in enumerate(lines) if line.startswith("JsonRpcError"))
    rows: list[Row] = []
    parents = ["JsonRpcError"]  # parents[d] is the class drawn last at depth d - 1
    for line in lines[root + 1 :]:
        m = _ROW.match(line)
        if m is None:
            assert not line.strip(), f"not a row of the tree: {line!r}"
            continue
        depth = len(m["indent"]) // 5  # each level indents by "│    "
        del parents[depth + 1 :]
        rows.append(Row(m["name"], parents[depth], int(m["code"]), int(m["status"])))
        parents.append(m["name"])
    return rows


def test_the_docstring_tree_parses_into_every_row() -> None:
    """The parser reads the drawing (guards the test below against an empty parse)."""
    rows = drawn_tree()
    assert len(rows) >= 12
    assert Row("InvalidMeta", "InvalidParams", codes.INVALID_PARAMS, 400) in rows


def test_the_docstring_tree_matches_the_error_classes() -> None:
    """Every row names a class of the module with that parent, code and HTTP status."""
    for row in drawn_tree():
        cls = getattr(err, row.name, None)
        assert inspect.isclass(cls) and issubclass(cls, err.JsonRpcError), row
        assert cls.__bases__ == (getattr(err, row.parent),), row
        instance = cls.__new__(cls)  # http_status reads only class attributes
        assert (cls.code, instance.http_status) == (row.code, row.status), row


def test_every_error_class_is_in_the_docstring_tree() -> None:
    """No class of the tree is missing from the drawing."""
    classes = {
        name
        for name, cls in vars(err).items()
        if inspect.isclass(cls)
        and issubclass(cls, err.JsonRpcError)
        and cls is not err.JsonRpcError
        and cls.__module__ == err.__name__
    }
    assert classes == {row.name for row in drawn_tree()}


def test_only_codes_http_status_decides_a_status() -> None:
    """No error class defines its own status: each one is codes.http_status of its code and
    its status reason (a reason is a key of codes.HTTP_STATUS)."""
    classes = [c for c in vars(err).values() if inspect.isclass(c) and issubclass(c, Exception)]
    assert all("http_status" not in vars(c) for c in classes if c is not err.JsonRpcError)
    reasons = {c.status_reason for c in classes if issubclass(c, err.JsonRpcError)} - {None}
    assert reasons == {codes.MALFORMED_META}
    assert all((codes.INVALID_PARAMS, r) in codes.HTTP_STATUS for r in reasons)
