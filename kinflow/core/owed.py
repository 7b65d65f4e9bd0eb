"""``owed``: the one indexed field the heartbeat finds owed work by.

Every commit leaves repair hints on an instance (``nextEvaluationAt``,
``effectsDueAt``, ``owesAborts``, ``materialising``, ``propagateTo``). Each
used to have an index of its own, and every instance write maintained all of
them (about 0.2 ms of the embedded lake's CPU per index per write,
docs/performance.md). The commit now also folds them into one array,
``owed``, behind one multikey index (``instance_owed``):

* ``"due:<iso>"``: ``nextEvaluationAt``, for an instance still in flight;
* ``{"effects": "<iso>"}``: ``effectsDueAt``;
* ``"materialising"``, ``"owes-aborts"``: the two flags;
* ``"propagate:<parent id>"``: ``propagateTo``.

Every heartbeat query is then ``_type`` plus ONE predicate on ``owed`` (the
embedded planner uses an index only when it covers every predicate). The
encoding keeps those predicates exact under MongoDB's array semantics, where
``{$gt: a, $lte: b}`` on an array may be met by two different elements (the
embedded lake gives that answer too when it scans the collection instead of
the index): a false match needs an element of the same BSON type at or below
the range's lower bound. So ``"due:"`` is the lowest string prefix (nothing
sorts below it), ``"propagate:"`` the highest (its range is left open
above), and effects entries are the only objects. Ranges compare within one
type only, so no other kind can fall into a string or object range.

Pure: the entries and the filters; the shell runs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FIELD = "owed"
DUE = "due:"
EFFECTS = "effects"
MATERIALISING = "materialising"
ABORTS = "owes-aborts"
PROPAGATE = "propagate:"
Entry = str | dict[str, str]


def entries(*, due: str | None, completed: bool, effects_due: str | None,
            owes_aborts: bool | None, materialising: bool | None,
            propagate_to: str | None) -> list[Entry] | None:
    """The ``owed`` array for these hints (``None`` when nothing is owed)."""
    owed: list[Entry] = []
    if due and not completed:  # a finished instance is never ticked
        owed.append(DUE + due)
    if effects_due:
        owed.append({EFFECTS: effects_due})
    if materialising:
        owed.append(MATERIALISING)
    if owes_aborts:
        owed.append(ABORTS)
    if propagate_to:
        owed.append(PROPAGATE + propagate_to)
    return owed or None


def of_document(document: Mapping[str, Any]) -> list[Entry] | None:
    """The ``owed`` array a stored instance's hints call for (the upgrade computes it)."""
    return entries(due=_text(document.get("nextEvaluationAt")),
                   completed=document.get("completedAt") is not None,
                   effects_due=_text(document.get("effectsDueAt")),
                   owes_aborts=document.get("owesAborts") is True,
                   materialising=document.get("materialising") is True,
                   propagate_to=_text(document.get("propagateTo")))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# ---- the heartbeat's predicates (each one indexed predicate on ``owed``) ----


def due_by(now: str) -> dict[str, Any]:
    """In-flight instances whose next evaluation is at or before ``now`` (ISO)."""
    return {FIELD: {"$gt": DUE, "$lte": DUE + now}}


def effects_by(now: str) -> dict[str, Any]:
    """Instances with effects to run or a claim's lease ended at or before ``now``."""
    return {FIELD: {"$gt": {EFFECTS: ""}, "$lte": {EFFECTS: now}}}


def propagating_to(parent_id: str) -> dict[str, Any]:
    """Children whose parent ``parent_id`` is owed a stamp of their row."""
    return {FIELD: PROPAGATE + parent_id}


def unstamp(parent_id: str) -> dict[str, Any]:
    """The update clearing a child's owed stamp to ``parent_id`` (hint and entry)."""
    return {"$unset": {"propagateTo": "", "propagateToken": ""},
            "$pull": {FIELD: PROPAGATE + parent_id}}


ANY_PROPAGATE: dict[str, Any] = {FIELD: {"$gt": PROPAGATE}}
"""Children owing any parent a stamp (``propagate:`` is the highest string prefix)."""
OWES_ABORTS: dict[str, Any] = {FIELD: ABORTS}
IS_MATERIALISING: dict[str, Any] = {FIELD: MATERIALISING}
MATERIALISED: dict[str, Any] = {"$unset": {"materialising": ""},
                                "$pull": {FIELD: MATERIALISING}}
"""The update clearing a parent's ``materialising`` mark once its children exist."""
