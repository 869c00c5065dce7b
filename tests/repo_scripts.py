"""The repository's scripts that are no package (bench/, docs/examples/, docs/hooks/), for the
tests that check them: loaded by path as a module, or run as a program."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Final

REPO: Final = Path(__file__).resolve().parents[1]


def load(path: str, name: str) -> ModuleType:
    """The script at `path` (from the repository's root) executed as the module `name`, which
    is registered in `sys.modules` (a dataclass in it looks its module up there)."""
    spec = importlib.util.spec_from_file_location(name, REPO / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


async def run(path: str, env: Mapping[str, str], *, timeout: float = 90.0) -> str:
    """What the script at `path` printed (its output and errors together), run with this
    Python from the repository's root, `env` added to this process's environment; the test
    fails when it exits non-zero or takes longer than `timeout` seconds."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(REPO / path),
        cwd=REPO,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(timeout):
        out, _ = await proc.communicate()
    text = out.decode("utf-8", errors="replace")
    assert proc.returncode == 0, text
    return text
