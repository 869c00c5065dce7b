"""Reports: human text, JSON and JUnit XML; the expected-failures file and the exit code.

An expected failure (listed in the YAML file) that fails or warns is `xfail`; one that now
passes is `stale` and fails the run, so the list cannot silently go out of date.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from xml.etree import ElementTree as ET

import yaml

from tether.conformance.check import Check
from tether.conformance.requirements import REQUIREMENTS

Final = Literal["pass", "fail", "warn", "skip", "xfail", "stale"]
LABEL: Mapping[Final, str] = {
    "pass": "PASS ",
    "fail": "FAIL ",
    "warn": "WARN ",
    "skip": "SKIP ",
    "xfail": "XFAIL",
    "stale": "STALE",
}


class ReportError(Exception):
    """An unusable expected-failures file."""


@dataclass(frozen=True)
class Outcome:
    check: Check
    final: Final
    reason: str = ""

    @property
    def message(self) -> str:
        if self.final == "stale":
            return f"listed as an expected failure but passed: remove it ({self.check.message})"
        if self.final == "xfail":
            why = f" [{self.reason}]" if self.reason else ""
            return f"expected failure{why}: {self.check.message}"
        return self.check.message


def load_expected_failures(path: Path) -> dict[str, str]:
    """check id → reason, from a YAML list of ids or a mapping id → reason (optionally under
    a `server:` or `expected_failures:` key).

    Raises:
        ReportError: unreadable YAML, a wrong shape, or an unknown check id.
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ReportError(f"cannot read {path}: {exc}") from exc
    if isinstance(data, dict) and set(data) <= {"server", "expected_failures"} and data:
        data = data.get("server", data.get("expected_failures"))
    if data is None:
        return {}
    if isinstance(data, list) and all(isinstance(i, str) for i in data):
        entries = dict.fromkeys(data, "")
    elif isinstance(data, dict) and all(isinstance(k, str) for k in data):
        entries = {k: "" if v is None else str(v) for k, v in data.items()}
    else:
        raise ReportError(f"{path}: expected a list of check ids or a mapping id → reason")
    unknown = sorted(set(entries) - set(REQUIREMENTS))
    if unknown:
        raise ReportError(f"{path}: unknown check id(s): {', '.join(unknown)}")
    return entries


def apply(checks: Sequence[Check], expected: Mapping[str, str]) -> list[Outcome]:
    out = []
    for c in checks:
        if c.id not in expected or c.status == "skip":
            out.append(Outcome(c, c.status))
        elif c.status == "pass":
            out.append(Outcome(c, "stale", expected[c.id]))
        else:
            out.append(Outcome(c, "xfail", expected[c.id]))
    return out


def counts(outcomes: Sequence[Outcome]) -> Counter[str]:
    return Counter(o.final for o in outcomes)


def exit_code(outcomes: Sequence[Outcome]) -> int:
    """1 on an unexpected failure or a stale expected failure, else 0."""
    return 1 if any(o.final in ("fail", "stale") for o in outcomes) else 0


def summary_line(outcomes: Sequence[Outcome]) -> str:
    n = counts(outcomes)
    return f"{n['pass']} passed, {n['fail'] + n['stale']} failed, {n['skip']} skipped"


def text(outcomes: Sequence[Outcome], *, verbose: bool = False) -> str:
    lines = []
    for o in outcomes:
        lines.append(f"{LABEL[o.final]} {o.check.id}  {o.message}")
        if verbose:
            lines.append(f"        spec: {o.check.spec_ref}")
            lines += ["        " + line for line in _details(o).splitlines()]
    n = counts(outcomes)
    if n["warn"] or n["xfail"]:
        lines.append(f"{n['warn']} warnings, {n['xfail']} expected failures")
    lines.append(summary_line(outcomes))
    return "\n".join(lines) + "\n"


def to_json(outcomes: Sequence[Outcome], url: str) -> dict[str, Any]:
    n = counts(outcomes)
    return {
        "url": url,
        "summary": {k: n[k] for k in ("pass", "fail", "warn", "skip", "xfail", "stale")},
        "exit_code": exit_code(outcomes),
        "checks": [
            {
                "id": o.check.id,
                "scenario": o.check.scenario,
                "status": o.final,
                "message": o.message,
                "spec_ref": o.check.spec_ref,
                "level": REQUIREMENTS[o.check.id].level,
                "checklist": list(REQUIREMENTS[o.check.id].items),
                "details": o.check.details,
            }
            for o in outcomes
        ],
    }


def junit(outcomes: Sequence[Outcome], url: str) -> str:
    """JUnit XML: one testsuite per scenario, one testcase per check."""
    root = ET.Element("testsuites", name="tether-conformance")
    suites: dict[str, ET.Element] = {}
    for o in outcomes:
        scenario = o.check.scenario or "harness"
        suite = suites.get(scenario)
        if suite is None:
            suite = suites[scenario] = ET.SubElement(root, "testsuite", name=scenario)
            ET.SubElement(ET.SubElement(suite, "properties"), "property", name="url", value=url)
        case = ET.SubElement(suite, "testcase", classname=scenario, name=o.check.id)
        if o.final in ("fail", "stale"):
            ET.SubElement(case, "failure", message=o.message, type=o.final).text = _details(o)
        elif o.final in ("skip", "xfail"):
            ET.SubElement(case, "skipped", message=o.message)
        out = ET.SubElement(case, "system-out")
        out.text = f"{o.final.upper()}: {o.message}\nspec: {o.check.spec_ref}\n"
    for scenario, suite in suites.items():
        mine = [o for o in outcomes if (o.check.scenario or "harness") == scenario]
        n = counts(mine)
        suite.set("tests", str(len(mine)))
        suite.set("failures", str(n["fail"] + n["stale"]))
        suite.set("skipped", str(n["skip"] + n["xfail"]))
        suite.set("errors", "0")
    n = counts(outcomes)
    root.set("tests", str(len(outcomes)))
    root.set("failures", str(n["fail"] + n["stale"]))
    root.set("skipped", str(n["skip"] + n["xfail"]))
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _details(o: Outcome) -> str:
    return json.dumps(o.check.details, indent=2, ensure_ascii=False)
