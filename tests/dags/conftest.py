"""DAG runtime fixtures: an App with DAGs, run against the per-test database; `sh` as bash."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.runtime.conftest import FAST, Start, start

__all__ = ["FAST", "Start", "bash_as_sh", "start"]

pytestmark = pytest.mark.postgres


@pytest.fixture
def bash_as_sh(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`sh` is bash, as on Fedora, RHEL, macOS and many container images: a directory first on
    PATH where `sh` links to bash. The runtime starts `sh` by name, found on the run's PATH
    (passed through from this process's), so every shell it starts for a DAG that names none
    is bash under POSIX mode here, as in production on those systems; SHELL is unset, so a
    step's default shell is `sh` too. Returns the link."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    shim = tmp_path_factory.mktemp("bash-as-sh") / "sh"
    shim.symlink_to(bash)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
    monkeypatch.delenv("SHELL", raising=False)
    return shim
