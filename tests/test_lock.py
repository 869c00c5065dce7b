"""requirements/lock.txt, what every one of our own runs installs: it agrees with the ranges in
pyproject.toml, pins every package with hashes, and is what this suite runs on."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements" / "lock.txt"
PIN = re.compile(r"^(?P<requirement>[A-Za-z0-9][^\\]*?)\s*\\?$")


def pins() -> dict[str, list[Requirement]]:
    """The lock's pins by canonical name (a name may have one pin per marker), each checked to
    be `name==version` with at least one hash."""
    found: dict[str, list[Requirement]] = {}
    lines = LOCK.read_text("utf-8").splitlines()
    for at, line in enumerate(lines):
        match = PIN.match(line)
        if match is None:
            continue
        req = Requirement(match["requirement"])
        (spec,) = req.specifier
        assert spec.operator == "==", line
        assert lines[at + 1].strip().startswith("--hash=sha256:"), line
        found.setdefault(canonicalize_name(req.name), []).append(req)
    return found


def here(reqs: list[Requirement]) -> Requirement | None:
    """The pin whose marker holds on this interpreter and platform, if any."""
    matching = [r for r in reqs if r.marker is None or r.marker.evaluate()]
    assert len(matching) <= 1, matching
    return matching[0] if matching else None


def test_the_lock_satisfies_every_range_in_pyproject() -> None:
    """Each dependency, extra and build requirement in pyproject.toml has a pin inside its
    range (a dependency added or narrowed without `make lock` fails here)."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    project = pyproject["project"]
    # the build requirements too: the editable install builds with the locked setuptools
    wanted = [*project["dependencies"], *pyproject["build-system"]["requires"]]
    for extra in project["optional-dependencies"].values():
        wanted += extra
    locked = pins()
    missing = []
    for line in wanted:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate():
            continue
        pin = here(locked.get(canonicalize_name(req.name), []))
        version = None if pin is None else next(iter(pin.specifier)).version
        if version is None or not req.specifier.contains(version, prereleases=True):
            missing.append(f"{line} (locked: {version})")
    assert missing == [], f"run `make lock`: the lock does not satisfy {missing}"


def test_this_suite_runs_on_exactly_the_locked_versions() -> None:
    """Every package the lock pins for this platform is installed at its pinned version: the
    findings that tests pin about other projects hold for these versions."""
    wrong = []
    for name, reqs in pins().items():
        pin = here(reqs)
        if pin is None:
            continue
        want = next(iter(pin.specifier)).version
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = "not installed"
        if have != want:
            wrong.append(f"{name} {have} (locked {want})")
    assert wrong == [], (
        f"this environment is not requirements/lock.txt: {wrong}; run `make test` (it re-creates "
        ".venv from the lock) or `pip install --require-hashes --no-deps -r requirements/lock.txt`"
    )
