"""Load the user's App from `module:attr` or `path/to/file.py:attr`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from tether.runtime.registry import App

DEFAULT_APP = "tether.examples:app"


def load_app(spec: str) -> App:
    """Import and return the App named by `spec`. Raises ValueError with a clear message."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise ValueError(f"APP must look like module:attr or file.py:attr, got {spec!r}")
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            raise ValueError(f"no such file: {path}")
        name = f"tether_user_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"cannot import {path}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
    else:
        if "" not in sys.path:
            sys.path.insert(0, "")
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise ValueError(f"cannot import {target!r}: {exc}") from exc
    app = getattr(module, attr, None)
    if not isinstance(app, App):
        raise ValueError(f"{spec!r} is not a tether.App (got {type(app).__name__})")
    return app
