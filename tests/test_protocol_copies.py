"""Our choice: the reliability suite, the benchmarks and the test client speak MCP
from outside, like the conformance harness, and the runtime's remote client may not import the
protocol layer, so they keep their own copies of a few protocol facts; this test holds every
copy equal to the library's constants. Copies are read from the source with `ast` (a benchmark
script is not imported: importing it would start nothing, but it is not a package)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from tether.conformance import spec
from tether.jsonrpc import codes, headers

ROOT = Path(__file__).resolve().parents[1]
REMOTE = "src/tether/runtime/remote/spec.py"
# the order the Tasks extension lists its statuses in (the remote client's tuple keeps it)
_STATUS_ORDER = ("working", "input_required", "completed", "failed", "cancelled")

# (file, constant name) → the library's value it must equal
COPIES: dict[tuple[str, str], Any] = {
    ("reliability/client.py", "VERSION"): codes.MODERN_VERSION,
    ("reliability/client.py", "TASKS"): codes.TASKS_EXTENSION,
    ("reliability/client.py", "UNAVAILABLE"): codes.UNAVAILABLE,
    ("reliability/client.py", "INTERNAL"): codes.INTERNAL_ERROR,
    ("reliability/client.py", "TASK_STATUSES"): spec.TASK_STATUSES,
    ("reliability/client.py", "NAME_FIELDS"): {
        method: codes.NAME_FIELDS[method] for method in ("tools/call", "tasks/get", "tasks/update")
    },
    ("reliability/runs.py", "TERMINAL"): spec.TERMINAL,
    ("bench/tasks_get.py", "VERSION"): codes.MODERN_VERSION,
    ("bench/tasks_get.py", "TASKS"): codes.TASKS_EXTENSION,
    ("tests/mcp_client.py", "VERSION"): codes.MODERN_VERSION,
    ("tests/mcp_client.py", "TASKS"): codes.TASKS_EXTENSION,
    # the remote client (the runtime may not import the protocol layer it talks to)
    (REMOTE, "VERSION"): codes.MODERN_VERSION,
    (REMOTE, "TASKS"): codes.TASKS_EXTENSION,
    (REMOTE, "META_PROTOCOL_VERSION"): codes.META_PROTOCOL_VERSION,
    (REMOTE, "META_CLIENT_CAPABILITIES"): codes.META_CLIENT_CAPABILITIES,
    (REMOTE, "META_CLIENT_INFO"): codes.META_CLIENT_INFO,
    (REMOTE, "H_PROTOCOL_VERSION"): codes.H_PROTOCOL_VERSION,
    (REMOTE, "H_METHOD"): codes.H_METHOD,
    (REMOTE, "H_NAME"): codes.H_NAME,
    (REMOTE, "BASE64_PREFIX"): codes.BASE64_PREFIX,
    (REMOTE, "BASE64_SUFFIX"): codes.BASE64_SUFFIX,
    (REMOTE, "IDEMPOTENCY_HEADER"): headers.IDEMPOTENCY_HEADER,
    (REMOTE, "JSON"): headers.JSON,
    (REMOTE, "SSE"): headers.SSE,
    (REMOTE, "INVALID_PARAMS"): codes.INVALID_PARAMS,
    (REMOTE, "TOOLS_CALL"): codes.TOOLS_CALL,
    (REMOTE, "H_PARAM_PREFIX"): codes.H_PARAM_PREFIX,
    (REMOTE, "X_MCP_HEADER"): spec.X_MCP_HEADER,
    (REMOTE, "METHOD_NOT_FOUND"): codes.METHOD_NOT_FOUND,
    (REMOTE, "HEADER_MISMATCH"): codes.HEADER_MISMATCH,
    (REMOTE, "LISTEN"): codes.LISTEN,
    (REMOTE, "LISTEN_ACKNOWLEDGED"): codes.LISTEN_ACKNOWLEDGED,
    (REMOTE, "TASK_NOTIFICATION"): codes.TASK_NOTIFICATION,
    (REMOTE, "TASK_STATUSES"): tuple(sorted(spec.TASK_STATUSES, key=_STATUS_ORDER.index)),
}


def module_constant(path: Path, name: str) -> Any:
    """The literal value assigned to `name` at the top level of `path` (frozenset({…}) too)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "frozenset":
                return frozenset(ast.literal_eval(value.args[0]))
            return ast.literal_eval(value)
    raise AssertionError(f"{path} no longer defines {name}: update COPIES")


@pytest.mark.parametrize(
    ("where", "expected"),
    COPIES.items(),
    ids=[f"{path}:{name}" for path, name in COPIES],  # stable across xdist workers
)
def test_each_protocol_copy_equals_the_library(where: tuple[str, str], expected: Any) -> None:
    path, name = where
    assert module_constant(ROOT / path, name) == expected


def test_the_checker_sees_a_wrong_copy(tmp_path: Path) -> None:
    """The check can fail: a copy that drifted reads back as different."""
    drifted = tmp_path / "client.py"
    drifted.write_text('VERSION = "2025-11-25"\nTERMINAL = frozenset({"completed"})\n')
    assert module_constant(drifted, "VERSION") != codes.MODERN_VERSION
    assert module_constant(drifted, "TERMINAL") != spec.TERMINAL
