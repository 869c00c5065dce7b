"""The shape of the source: small modules, short functions, no import cycles (our rules)."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import grimp

import tether

SRC = Path(tether.__file__).parent
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

#: Modules still over a limit, path relative to src/tether → why. Their owners are splitting
#: them; each entry must still be over (a test fails on a stale one), so the list only shrinks.
OVER_LIMIT: Mapping[str, str] = {}


def _modules() -> Iterator[tuple[str, str]]:
    for path in sorted(SRC.rglob("*.py")):
        yield path.relative_to(SRC).as_posix(), path.read_text(encoding="utf-8")


def _functions(source: str) -> Iterator[tuple[str, int]]:
    """(name, lines from `def` to its last line) for every function, nested ones included."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            end = node.end_lineno if node.end_lineno is not None else node.lineno
            yield node.name, end - node.lineno + 1


def _over_limit(rel: str, source: str) -> list[str]:
    problems = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        problems.append(f"{rel}: {lines} lines (max {MAX_MODULE_LINES})")
    for name, length in _functions(source):
        if length > MAX_FUNCTION_LINES:
            problems.append(f"{rel}: {name}() is {length} lines (max {MAX_FUNCTION_LINES})")
    return problems


def test_no_module_over_400_lines_and_no_function_over_60() -> None:
    """Our choice: one concept per module, functions that fit on a screen."""
    problems = [
        problem
        for rel, source in _modules()
        if rel not in OVER_LIMIT
        for problem in _over_limit(rel, source)
    ]
    assert problems == []


def test_every_allowed_exception_is_still_over_a_limit() -> None:
    """Our choice: an allow-list entry goes once its module fits, so the rule only tightens."""
    sources = dict(_modules())
    stale = [rel for rel in OVER_LIMIT if rel not in sources or not _over_limit(rel, sources[rel])]
    assert stale == []


def test_the_shape_check_sees_a_long_function_and_a_long_module() -> None:
    """The checker itself: a 61-line function and a 401-line module are reported."""
    long_function = "def f():\n" + "    x = 1\n" * 60
    assert _over_limit("f.py", long_function) == ["f.py: f() is 61 lines (max 60)"]
    long_module = "x = 1\n" * 401
    assert _over_limit("m.py", long_module) == ["m.py: 401 lines (max 400)"]
    assert _over_limit("ok.py", "def f():\n" + "    x = 1\n" * 59) == []


def test_no_module_imports_itself_through_others() -> None:
    """Our choice: imports point one way, also inside a package (type-only
    imports included), so any module can be read and tested on its own."""
    graph = grimp.build_graph("tether", cache_dir=None)
    cycles = sorted(
        f"{importer} ↔ {imported}"
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if importer < imported and graph.chain_exists(importer=imported, imported=importer)
    )
    assert cycles == []
