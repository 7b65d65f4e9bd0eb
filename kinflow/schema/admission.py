"""A cohort's admission as GraphQL shows it (core/cohort/admission.py): pause, the
per-key window, the start rate, and ``Cohort.keys`` (live and queued rows per key).

The settings are the operator's for the visit that spawned the cohort
(``updateCohort``, ``pauseCohort``), else what the parent's pinned definition
declares. Per-key counts read the cohort's rows (only when ``keys`` is selected).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import strawberry

from kinflow.core.cohort import admission
from kinflow.core.cohort.registry import Row
from kinflow.core.definitions import parse_snapshot
from kinflow.core.state import CohortWindow
from kinflow.errors import InvalidInput
from kinflow.schema.instance_parts import PageInfo

Doc = dict[str, Any]
MAX_KEYS_PAGE = 1000


@dataclass(frozen=True, slots=True)
class Admission:
    """The admission settings of one cohort, as they apply now."""

    paused: bool = False
    paused_reason: str | None = None
    max_active_per_key: int | None = None
    start_rate: dict[str, Any] | None = None


def admission_of(parent: Doc | None, activity: str, last: Row | None) -> Admission:
    """The settings of the cohort ``last`` belongs to (else the parent's latest visit)."""
    if parent is None:
        return Admission()
    entries = parent.get("stages") or []
    visit = last.stage_entry if last is not None else (
        entries[-1].get("_key") if entries else None)
    stored = next((s for s in parent.get("cohorts") or []
                   if (s.get("activity"), s.get("stageEntry")) == (activity, visit)), None)
    own = CohortWindow.model_validate(stored) if isinstance(stored, dict) else None
    stage = next((e.get("name") for e in entries if e.get("_key") == visit), None)
    snapshot = parent.get("definitionSnapshot")
    block = (admission.spawn_block(parse_snapshot(snapshot), stage, activity,
                                   last.action if last is not None else None)
             if isinstance(stage, str) and isinstance(snapshot, str) else None)
    rate = admission.rate_of(own, block)
    return Admission(paused=own is not None and own.pausedAt is not None,
                     paused_reason=own.pausedReason if own is not None else None,
                     max_active_per_key=admission.per_key_of(own, block),
                     start_rate=rate.to_json() if rate is not None else None)


@strawberry.type(description="Live and queued rows of one concurrencyKey of a cohort.")
class CohortKeyCount:
    key: str
    active: int = strawberry.field(description="Rows of the key whose child is live.")
    queued: int = strawberry.field(description="Rows of the key waiting to start.")


@strawberry.type(description="A page of a cohort's keys (concurrencyKey), in key order.")
class CohortKeyConnection:
    nodes: list[CohortKeyCount]
    page_info: PageInfo
    total_count: int = strawberry.field(description="Keys with a live or queued row.")


def key_counts(rows: list[Row]) -> dict[str, list[int]]:
    """Per key, its live and queued rows (keys with neither are left out), by key."""
    counts: dict[str, list[int]] = {}
    for row in rows:
        if row.key is None or row.resolved:
            continue
        pair = counts.setdefault(row.key, [0, 0])
        pair[1 if row.status == "queued" else 0] += 1
    return counts


def keys_page(counts: dict[str, list[int]], first: int, after: str | None
              ) -> CohortKeyConnection:
    """``first`` keys after the cursor ``after`` (base64 of the last key shown), from the
    ``[live, queued]`` pairs per key (``key_counts``, or the cohort summary's ``keys``)."""
    if isinstance(first, bool) or not 1 <= first <= MAX_KEYS_PAGE:
        raise InvalidInput(f"first must be 1 to {MAX_KEYS_PAGE}", field="first", value=first,
                           reason="range")
    every = [CohortKeyCount(key=key, active=pair[0], queued=pair[1])
             for key, pair in sorted(counts.items()) if pair[0] or pair[1]]
    start = 0
    if after is not None:
        last = _decode(after)
        start = next((i for i, node in enumerate(every) if node.key > last), len(every))
    nodes = every[start:start + first]
    more = start + first < len(every)
    return CohortKeyConnection(
        nodes=nodes, total_count=len(every),
        page_info=PageInfo(has_next_page=more,
                           end_cursor=_encode(nodes[-1].key) if nodes else None))


def _encode(key: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"key": key}).encode()).decode()


def _decode(cursor: str) -> str:
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if isinstance(value, dict) and isinstance(value.get("key"), str):
            return str(value["key"])
    except (ValueError, UnicodeDecodeError):
        pass
    raise InvalidInput("after is not a cursor of this cohort's keys", field="after",
                       value=cursor, reason="cursor")
