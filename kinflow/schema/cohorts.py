"""Which registry rows a cohort question is about, and which activities can have one.

``cohort(parentId, activity)`` means the rows the activity's spawn produced
in the parent's current stage visit. Once a parent has moved on (finished,
aborted, or past the fan-out stage) its current visit has none, and the
answer would be an empty cohort; instead the rows of the last visit that
spawned for the activity answer, so a finished family stays visible. An
activity the parent's definition does not name is refused (a typo would
otherwise read as an empty cohort for ever).
"""

from __future__ import annotations

from typing import Any

from kinflow.core.cohort.registry import Row, select
from kinflow.core.cohort.window import declared_max
from kinflow.core.definitions import definition_id, parse_snapshot
from kinflow.core.errors import CohortNotFound
from kinflow.schema.loaders import Doc, Loaders


def cohort_rows(
    rows: list[Row], activity: str, action: str | None = None, current_only: bool | None = True
) -> list[Row]:
    """The activity's rows of the current visit, else of the last visit that spawned."""
    mine = select(rows, activity=activity)
    if current_only:
        visit = [r for r in mine if r.current]
        if not visit and mine:
            last = mine[-1].stage_entry
            visit = [r for r in mine if r.stage_entry == last]
        mine = visit
    return select(mine, action=action)


def cohort_signature(rows: list[Row]) -> tuple[tuple[Any, ...], ...]:
    """The cohort's members and their states: an event goes out only when this changes.

    The parent's stamp of a child whose finish was already shown, and the parent
    leaving the visit (rows no longer ``current``), change nothing here.
    """
    return tuple((r.child_id, r.status, r.stage, r.condemned, r.abort_reason) for r in rows)


def cohort_window(parent: Doc, activity: str, rows: list[Row]) -> int | None:
    """The cohort's ``maxActive`` (core/cohort/window.py): the operator's setting for the visit
    that spawned ``rows``, else what the parent's pinned definition declares."""
    entries = parent.get("stages") or []
    visit = rows[-1].stage_entry if rows else (entries[-1].get("_key") if entries else None)
    for setting in parent.get("cohorts") or []:
        if (setting.get("activity"), setting.get("stageEntry")) == (activity, visit) and \
                isinstance(setting.get("maxActive"), int):
            return int(setting["maxActive"])
    stage = next((e.get("name") for e in entries if e.get("_key") == visit), None)
    snapshot = parent.get("definitionSnapshot")
    if not isinstance(stage, str) or not isinstance(snapshot, str):
        return None
    action = rows[-1].action if rows else None
    return declared_max(parse_snapshot(snapshot), stage, activity, action)


def definition_activities(definition: Doc) -> set[str]:
    return {
        str(activity.get("name"))
        for stage in definition.get("stages") or []
        for activity in stage.get("activities") or []
    }


async def check_activity(loaders: Loaders, parent: Doc, activity: str, rows: list[Row]) -> None:
    """Refuse an activity the parent's pinned definition does not have (``cohort-not-found``)."""
    if any(r.activity == activity for r in rows):
        return
    name, version = parent.get("definition"), parent.get("pinnedVersion")
    if not isinstance(name, str) or not isinstance(version, int):
        return
    definition = await loaders.documents.load(definition_id(name, version))
    if definition is None:  # cannot tell; an empty cohort is the honest answer
        return
    known = definition_activities(definition)
    if activity not in known:
        raise CohortNotFound(
            f"{name} v{version} has no activity {activity!r}", parentId=parent["_id"],
            activity=activity, definition=name, activities=sorted(known),
        )  # fmt: skip
