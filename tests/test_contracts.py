"""Every module under src/tether is named in an import-linter contract (pyproject.toml), so a
new module cannot slip outside the layering. Our choice (docs/architecture.md, "Layers")."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import tether

SRC = Path(tether.__file__).resolve().parent
PYPROJECT = SRC.parents[1] / "pyproject.toml"


def _modules(package_dir: Path) -> list[str]:
    """Dotted names of every module in the package directory (packages by their __init__)."""
    names = []
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def _constrained(contracts: Iterable[Mapping[str, Any]]) -> set[str]:
    """The modules whose own imports some contract constrains: a layer below the top of a
    layers contract, or a source module of a forbidden (or independence) contract. The top
    layer may import anything, and being only someone else's forbidden target says nothing
    about what a module imports, so neither counts."""
    named: set[str] = set()
    for contract in contracts:
        for layer in contract.get("layers", [])[1:]:
            for item in re.split(r"[|:]", layer):
                named.add(item.strip().removeprefix("(").removesuffix(")"))
        named.update(contract.get("source_modules", []))
        named.update(contract.get("modules", []))
    return named


def _outside(modules: Sequence[str], contracts: Iterable[Mapping[str, Any]]) -> list[str]:
    named = _constrained(contracts)
    return [
        module
        for module in modules
        # the root package only holds the lazy public names (tests/test_package.py checks them)
        if module != "tether"
        and not any(module == name or module.startswith(name + ".") for name in named)
    ]


def _contracts() -> list[dict[str, Any]]:
    with PYPROJECT.open("rb") as f:
        config = tomllib.load(f)
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def test_every_module_sits_in_an_import_contract() -> None:
    """A module named in no contract could import anything; each must be a layer or a source."""
    modules = _modules(SRC)
    assert "tether.runtime.operations.env" in modules
    assert "tether.__main__" in modules
    assert _outside(modules, _contracts()) == []


def test_the_check_sees_a_module_left_out() -> None:
    """A package no contract constrains is reported, module by module: naming it only as a
    forbidden target or as the top layer does not count."""
    contracts = [
        {"layers": ["tether.app", "tether.mcp : tether.tools", "(tether.specs) | tether.storage"]},
        {"source_modules": ["tether.jsonrpc"], "forbidden_modules": ["tether.loader"]},
    ]
    modules = ["tether", "tether.app", "tether.jsonrpc.codec", "tether.loader", "tether.specs.dag"]
    modules += ["tether.storage.repo", "tether.storagex", "tether.tools.catalog"]
    assert _outside(modules, contracts) == ["tether.app", "tether.loader", "tether.storagex"]
