"""Load the user's App from `module:attr` or `path/to/file.py:attr`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

from tether.runtime.registry import App

DEFAULT_APP = "tether.examples:app"


class AppLoadError(ValueError):
    """The App named could not be loaded; the message says which and why, in one line."""


def load_app(spec: str) -> App:
    """Import and return the App named by `spec`.

    Raises:
        AppLoadError: `spec` is malformed, names no file or module, its module fails while it
            is imported (the error and the line it came from), or its attribute is no App.
    """
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise AppLoadError(f"APP must look like module:attr or file.py:attr, got {spec!r}")
    try:
        module = _import(target)
    except AppLoadError:
        raise
    except ImportError as exc:
        raise AppLoadError(f"cannot import {target!r}: {exc}") from exc
    except Exception as exc:  # the user's module failed as it was imported
        raise AppLoadError(f"cannot load {spec}: {_failure(exc)}") from exc
    app = getattr(module, attr, None)
    if not isinstance(app, App):
        raise AppLoadError(f"{spec!r} is not a tether.App (got {type(app).__name__})")
    return app


def _import(target: str) -> ModuleType:
    if not target.endswith(".py"):
        if "" not in sys.path:
            sys.path.insert(0, "")
        return importlib.import_module(target)
    path = Path(target).resolve()
    if not path.is_file():
        raise AppLoadError(f"no such file: {path}")
    name = f"tether_user_{path.stem}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise AppLoadError(f"cannot import {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    module_spec.loader.exec_module(module)
    return module


def _failure(exc: BaseException) -> str:
    """`Type: message (file, line N)`: where in the user's code the import failed (a syntax
    error names its place itself)."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError):
        return text
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return text
    return f"{text} ({frames[-1].filename}, line {frames[-1].lineno})"
