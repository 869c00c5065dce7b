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


RUNTIME = REPO / "requirements" / "runtime.txt"


def pinned(line: str) -> Requirement:
    """The requirement on a pin's first line."""
    match = PIN.match(line)
    assert match is not None, line
    return Requirement(match["requirement"])


def blocks(path: Path) -> dict[str, str]:
    """Each pin of a compiled requirements file with its hash lines, by canonical name and
    marker (comments left out)."""
    found: dict[str, str] = {}
    current: list[str] = []
    for line in [*path.read_text("utf-8").splitlines(), ""]:
        if current and not line.startswith("    --hash="):
            req = pinned(current[0])
            found[f"{canonicalize_name(req.name)} ; {req.marker}"] = "\n".join(current)
            current = []
        if PIN.match(line) or (current and line.startswith("    --hash=")):
            current.append(line)
    return found


def runtime_closure() -> set[str]:
    """The canonical names pyproject.toml's dependencies (no extras) pull in on this platform,
    walked through the installed metadata (the lock's versions, as the test above checks)."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    todo = [(Requirement(line), "") for line in pyproject["project"]["dependencies"]]
    seen: set[tuple[str, str]] = set()
    for req, extra in todo:
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        for wanted in ["", *req.extras]:
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            todo += [(Requirement(line), wanted) for line in metadata.requires(name) or []]
    return {name for name, _ in seen}


def test_the_runtime_requirements_are_the_locks_pins_of_the_runtime_closure() -> None:
    """Our choice: requirements/runtime.txt (what a deployment installs besides the wheel) holds
    exactly the package's own dependencies and their dependencies, plus pip and setuptools,
    each pinned as in the lock with the same hashes (`make lock` writes both files)."""
    runtime = blocks(RUNTIME)
    locked = blocks(LOCK)
    changed = sorted(key for key, text in runtime.items() if locked.get(key) != text)
    assert changed == [], f"run `make lock`: runtime.txt disagrees with lock.txt on {changed}"
    pins_here = {
        key.split(" ; ")[0] for key, text in runtime.items() if here([pinned(text.splitlines()[0])])
    }
    wanted = runtime_closure() | {"pip", "setuptools"}
    assert pins_here == wanted, "run `make lock`: runtime.txt is not the runtime closure"
