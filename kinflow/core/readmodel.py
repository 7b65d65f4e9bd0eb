"""How a stored instance reads: its status, open visit, fields and family filters.

Owns the one status vocabulary and every derivation of it. An instance is
``active``, ``cancelling``, ``completed``, ``aborted`` or ``cancelled``
(GraphQL's ``InstanceStatus``); a parent's registry row and ``$subworkflows``
spell a finished child ``done`` and a cancelling one ``active`` (with
``cancelling: true``; ``ChildStatus``, a definition contract), and
``ROW_STATUS`` is the one map between the two. It also owns "who is a child of
whom" in both forms: the lake filter (a query) and the matcher (an event already
in hand), which must agree. Abort and the end of a cancellation stamp
``completedAt`` too, so "live" (active or cancelling) is ``completedAt`` unset.

It reads plain stored documents (JSON-shaped dicts), never a lake or a
model, so the API, the CLI, the inspector and the engine can all use it.
Family filters take GDR strings; making them from ids is the caller's job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

Doc = Mapping[str, Any]
Status = Literal["active", "completed", "aborted", "cancelling", "cancelled"]
# queued: waiting in a window; cancelled: the child ended its graceful cancellation
RowStatus = Literal["active", "done", "aborted", "queued", "cancelled"]

ACTIVE: Status = "active"
COMPLETED: Status = "completed"
ABORTED: Status = "aborted"
CANCELLING: Status = "cancelling"  # cancelInstance was asked; still live (core/cancel_instance.py)
CANCELLED: Status = "cancelled"
STATUSES: tuple[Status, ...] = (ACTIVE, COMPLETED, ABORTED, CANCELLING, CANCELLED)

ROW_STATUS: dict[Status, RowStatus] = {ACTIVE: "active", COMPLETED: "done", ABORTED: "aborted",
                                       CANCELLING: "active", CANCELLED: "cancelled"}
"""An instance's status as its parent's row (and ``$subworkflows``) spells it (a
cancelling child's row is active, its ``cancelling`` flag says the rest)."""


# ---------------------------------------------------------------- status


def status_of(aborted_at: object, completed_at: object, cancelling_at: object = None,
              cancelled_at: object = None) -> Status:
    """The status from an instance's stamps (abort and the end of a cancellation also
    stamp ``completedAt``); for a parsed ``Instance`` as much as for a stored document.
    An abort wins over a cancellation in progress."""
    if aborted_at:
        return ABORTED
    if cancelled_at:
        return CANCELLED
    if completed_at:
        return COMPLETED
    return CANCELLING if cancelling_at else ACTIVE


def instance_status(doc: Doc) -> Status:
    """The status of a stored instance."""
    return status_of(doc.get("abortedAt"), doc.get("completedAt"), doc.get("cancellingAt"),
                     doc.get("cancelledAt"))


def cancelling(doc: Doc) -> bool:
    """Whether a stored instance is CANCELLING (its parent's row says ``cancelling``)."""
    return instance_status(doc) == CANCELLING


def row_status(doc: Doc) -> RowStatus:
    """A child's status as its parent's registry row reads it."""
    return ROW_STATUS[instance_status(doc)]


def observable(doc: Doc) -> tuple[RowStatus, str | None]:
    """What a parent's row observes of a child: (status, stage once primed)."""
    stage = doc.get("currentStage") if doc.get("stages") else None
    return row_status(doc), stage if isinstance(stage, str) else None


def status_filter(status: Status) -> dict[str, Any]:
    """The lake filter form of ``instance_status(doc) == status``."""
    if status == ACTIVE:
        return {"completedAt": None, "cancellingAt": None}
    if status == CANCELLING:
        return {"completedAt": None, "cancellingAt": {"$ne": None}}
    if status == COMPLETED:
        return {"completedAt": {"$ne": None}, "abortedAt": None, "cancelledAt": None}
    if status == CANCELLED:
        return {"cancelledAt": {"$ne": None}, "abortedAt": None}
    return {"abortedAt": {"$ne": None}}


def live_filter() -> dict[str, Any]:
    """The lake filter of instances not finished yet (ACTIVE or CANCELLING)."""
    return {"completedAt": None}


# ---------------------------------------------------------------- the open visit


def open_entry(doc: Doc) -> dict[str, Any] | None:
    """The current stage visit (a completed instance's last visit stays open)."""
    for entry in reversed(doc.get("stages") or []):
        if entry.get("name") == doc.get("currentStage") and not entry.get("exitedAt"):
            return dict(entry)
    return None


def activities(doc: Doc) -> list[dict[str, Any]]:
    """The open visit's activity entries, as stored."""
    entry = open_entry(doc) or {}
    return list(entry.get("activities") or [])


def _field_values(entries: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {f["name"]: f.get("value") for f in entries or [] if "name" in f}


def effective_fields(doc: Doc) -> dict[str, Any]:
    """Workflow scope, overlaid by the open stage's scope, then its activities' scopes."""
    values = _field_values(doc.get("fields"))
    entry = open_entry(doc)
    if entry is not None:
        values.update(_field_values(entry.get("fields")))
        for activity in entry.get("activities") or []:
            values.update(_field_values(activity.get("fields")))
    return values


# ---------------------------------------------------------------- family


def ancestor_gdrs(doc: Doc) -> list[str]:
    """The GDRs of an instance's ancestors, root first."""
    return [str(a.get("id")) for a in doc.get("ancestors") or []]


def parent_gdr(doc: Doc) -> str | None:
    """The GDR of an instance's direct parent (its last ancestor), if any."""
    ancestors = doc.get("ancestors") or []
    return str(ancestors[-1].get("id")) if ancestors else None


def roots_filter() -> dict[str, Any]:
    """Instances nobody spawned."""
    return {"ancestors": {"$size": 0}}


def descendants_filter(root: str) -> dict[str, Any]:
    """Every instance below the instance whose GDR is ``root``."""
    return {"ancestors.id": root}


def children_filter(parent: str, parent_depth: int) -> dict[str, Any]:
    """Direct children of the parent whose GDR is ``parent`` and which has
    ``parent_depth`` ancestors (served by the ``ancestors.id`` index)."""
    return {"ancestors.id": parent, "ancestors": {"$size": parent_depth + 1}}


def live_children_filter(parent_id: str) -> dict[str, Any]:
    """The active direct children of the instance ``parent_id`` (a bare id), by the
    ``parentInstance`` hint (index ``instance_children``); for counting them."""
    return {"parentInstance": parent_id, **live_filter()}


def children_of_any_filter(parents: Iterable[str]) -> dict[str, Any]:
    """A superset of the direct children of several parents (one indexed query);
    ``parent_gdr(doc)`` sorts the results to their parents."""
    return {"ancestors.id": {"$in": list(parents)}}


def instance_filter(
    *,
    definition: str | None = None,
    stage: str | None = None,
    status: Status | None = None,
    roots_only: bool = False,
    root: str | None = None,
    parent: tuple[str, int] | None = None,
) -> dict[str, Any] | None:
    """The lake filter (without ``_type``) for instances matching every given
    condition; ``None`` when they cannot all hold. ``parent`` is (GDR, depth)."""
    query: dict[str, Any] = {}
    if definition is not None:
        query["definition"] = definition
    if stage is not None:
        query["currentStage"] = stage
    if status is not None:
        query.update(status_filter(status))
    if roots_only:
        if parent is not None or root is not None:
            return None  # a root is nobody's child or descendant
        query.update(roots_filter())
    if root is not None:
        query.update(descendants_filter(root))
    if parent is not None:
        children = children_filter(*parent)
        if root is not None:  # both name ancestors.id: the parent's goes under $and
            query["$and"] = [{"ancestors.id": children.pop("ancestors.id")}]
        query.update(children)
    return query


def instance_matches(
    doc: Doc,
    *,
    definition: str | None = None,
    stage: str | None = None,
    status: Status | None = None,
    roots_only: bool = False,
    root: str | None = None,
    parent: str | None = None,
) -> bool:
    """``instance_filter``'s conditions checked on a document in hand."""
    ancestors = ancestor_gdrs(doc)
    return (
        (definition is None or doc.get("definition") == definition)
        and (stage is None or doc.get("currentStage") == stage)
        and (status is None or instance_status(doc) == status)
        and (not roots_only or not ancestors)
        and (root is None or root in ancestors)
        and (parent is None or (bool(ancestors) and ancestors[-1] == parent))
    )
