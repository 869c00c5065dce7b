"""The package surface: a curated, sorted __all__ whose every name resolves, loaded lazily."""

from __future__ import annotations

import importlib
import subprocess
import sys
from importlib.metadata import metadata
from pathlib import Path

import tether
from tests.test_public_api import public_packages


def test_all_is_sorted_complete_and_resolves() -> None:
    """Our choice: __all__ is sorted and every public name imports."""
    assert tether.__all__ == sorted(tether.__all__)
    assert set(tether.__all__) - {"__version__"} == set(tether._EXPORTS)
    for name in tether.__all__:
        assert getattr(tether, name) is not None


def test_every_public_package_exports_names_that_resolve() -> None:
    """Our choice: a public package's `__all__` is sorted and every name in it imports."""
    for package in public_packages():
        module = importlib.import_module(package)
        exported = list(getattr(module, "__all__", []))
        assert exported == sorted(exported), package
        for name in exported:
            assert getattr(module, name) is not None, f"{package}.{name}"


def test_the_conformance_harness_imports_without_the_runtime() -> None:
    """The harness tests any server, so importing it must not load Tether's runtime."""
    code = (
        "import sys, tether.conformance.cli; "
        "sys.exit(1 if any(m.startswith('tether.runtime') for m in sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_the_package_declares_the_apache_licence_it_ships() -> None:
    """Our choice: the distribution's metadata names Apache-2.0 and the LICENSE file at the
    root holds that licence's text."""
    meta = metadata("tether")
    assert meta["License-Expression"] == "Apache-2.0"
    text = (Path(__file__).parents[1] / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text


def test_the_testing_kits_all_is_sorted_complete_and_resolves() -> None:
    """Our choice, as for `tether`: tether.testing's public names are listed, sorted, each
    loads, and each has a docstring."""
    import tether.testing

    assert tether.testing.__all__ == sorted(tether.testing.__all__)
    assert set(tether.testing.__all__) == set(tether.testing._EXPORTS)
    for name in tether.testing.__all__:
        assert getattr(tether.testing, name).__doc__, name
