"""gc_tuning.tune_gc, run in a child interpreter (it changes process-wide collector state)."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = """
import gc, json
from tether import gc_tuning
before = gc.get_freeze_count()
gc_tuning.tune_gc()
print(json.dumps({"before": before, "frozen": gc.get_freeze_count(),
                  "threshold": gc.get_threshold(), "young": gc_tuning.YOUNG_THRESHOLD}))
"""


def test_tune_gc_freezes_the_start_up_heap_and_raises_the_young_threshold() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD], check=True, capture_output=True, text=True
    ).stdout
    facts = json.loads(out)
    assert facts["before"] == 0
    assert facts["frozen"] > 1000  # the imported modules' objects at least
    assert facts["threshold"][0] == facts["young"] > 700  # CPython's default is 700
