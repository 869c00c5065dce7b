"""The shape of the source: no import cycles (our rule). Module and function sizes are not
capped: a module holds one concept, and a cohesive one may be long; the import contracts in
pyproject.toml keep the layers apart."""

from __future__ import annotations

import grimp


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
