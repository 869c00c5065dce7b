"""The harness's requirement map (`tether.conformance.requirements`) against the project's
CHECKLIST, both ways, and against the scenarios that record the checks.

The CHECKLIST is kept in the repository (`CHECKLIST.md` next to this file), so these tests run
in a clean checkout and never skip."""

from __future__ import annotations

import re
from pathlib import Path

from tether.conformance.requirements import CHECKLIST_SIZE, DEFERRED, EXTRA, REQUIREMENTS
from tether.conformance.scenarios import ALL

CHECKLIST = Path(__file__).resolve().parent / "CHECKLIST.md"
ITEM = re.compile(r"^(\d+)\. (.*)$")


def checklist() -> dict[int, str]:
    """item number → its line (the tags in brackets tell its level)."""
    items = {}
    for line in CHECKLIST.read_text(encoding="utf-8").splitlines():
        m = ITEM.match(line)
        if m:
            items[int(m.group(1))] = m.group(2)
    return items


def test_the_checklist_has_the_expected_number_of_items() -> None:
    """Our choice: CHECKLIST_SIZE follows CHECKLIST.md."""
    assert sorted(checklist()) == list(range(1, CHECKLIST_SIZE + 1))


def test_every_checklist_item_maps_to_a_check_or_a_recorded_deferral() -> None:
    """Every CHECKLIST item maps to a check by number, or to a deferral with a reason."""
    covered = {i for r in REQUIREMENTS.values() for i in r.items}
    items = set(range(1, CHECKLIST_SIZE + 1))
    assert sorted(items - covered - set(DEFERRED)) == []
    assert sorted(covered & set(DEFERRED)) == []
    assert all(reason.strip() for reason in DEFERRED.values())
    assert sorted((covered | set(DEFERRED)) - items) == []


def test_every_check_names_a_checklist_item_or_is_an_explicit_extra() -> None:
    """The mapping holds the other way too (no check without a reason to exist)."""
    assert {r.id for r in REQUIREMENTS.values() if not r.items} == EXTRA
    for r in REQUIREMENTS.values():
        assert r.url.startswith("https://"), r.id
        assert r.sentence, r.id


def test_each_checks_level_is_a_tag_of_its_checklist_items() -> None:
    """The level a check fails or warns at is the one the CHECKLIST states for its items."""
    items = checklist()
    for r in REQUIREMENTS.values():
        for i in r.items:
            tags = set(re.findall(r"\[([A-Z0-9]+)\]", items[i]))
            assert r.level in tags, (r.id, i, tags)


def test_the_scenarios_record_exactly_the_known_checks_each_once() -> None:
    """Every check id belongs to one scenario, and every scenario check is a known id."""
    ids = [c for sc in ALL for c in sc.checks]
    assert len(ids) == len(set(ids))
    assert set(ids) == set(REQUIREMENTS)
    assert len({sc.id for sc in ALL}) == len(ALL)
