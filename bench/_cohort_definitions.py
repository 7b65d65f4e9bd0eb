"""The parent and child workflows the cohort benchmarks drive (one child per ``bench-item``).

The parent's ``fan-out`` spawns a child per item; each child finishes with one
action; the parent's ``all-done`` fires once no child of the current visit is
active. ``windowed_parent(n)`` is the same parent with ``maxActive: n`` on its
spawn (its window). Shared by ``cohort.py`` (the engine called directly) and
``cohort_api.py`` (through ``kinflow serve``), so both measure the same cohort, and built by
the same functions as the observability tests' cohort (``tests/one_action_cohort.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.one_action_cohort import fan_out_parent, one_action_child

CHILD = one_action_child("bench", "Bench")
PARENT = fan_out_parent("bench", "Bench")


def windowed_parent(max_active: int) -> dict[str, Any]:
    """``PARENT`` with a window of ``max_active`` children; its gate also waits for queued
    rows (an explicit condition, not a reliance on the window's fill order)."""
    return fan_out_parent("bench", "Bench", max_active)
