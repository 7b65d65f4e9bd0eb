"""The read model: one status vocabulary, and family filters that agree with their matcher."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core import readmodel

ROOT = "lake:production:root"
CHILD = "lake:production:root.c1"


def instance(id_: str, *ancestors: str, **extra: Any) -> dict[str, Any]:
    return {"_id": id_, "ancestors": [{"id": a} for a in ancestors], "definition": "d",
            "currentStage": "s", **extra}  # fmt: skip


def test_status_vocabulary_and_row_spelling() -> None:
    active, done = instance("a"), instance("b", completedAt="t")
    aborted = instance("c", completedAt="t", abortedAt="t")  # abort stamps both
    assert [readmodel.instance_status(d) for d in (active, done, aborted)] == [
        "active", "completed", "aborted"]
    assert [readmodel.row_status(d) for d in (active, done, aborted)] == [
        "active", "done", "aborted"]
    assert set(readmodel.ROW_STATUS) == set(readmodel.STATUSES)
    assert readmodel.status_of(None, "t") == "completed"
    assert readmodel.status_of("t", "t") == "aborted"


def test_observable_reads_the_stage_only_once_primed() -> None:
    assert readmodel.observable(instance("a")) == ("active", None)
    primed = instance("a", stages=[{"name": "s"}])
    assert readmodel.observable(primed) == ("active", "s")


def test_open_entry_and_effective_fields_overlay_scopes() -> None:
    doc = instance("a", fields=[{"name": "x", "value": 1}, {"name": "y", "value": 1}], stages=[
        {"name": "s", "exitedAt": "t", "fields": [{"name": "x", "value": 9}]},
        {"name": "s", "fields": [{"name": "x", "value": 2}],
         "activities": [{"name": "act", "status": "active",
                         "fields": [{"name": "y", "value": 3}]}]},
    ])  # fmt: skip
    assert readmodel.effective_fields(doc) == {"x": 2, "y": 3}
    assert [a["name"] for a in readmodel.activities(doc)] == ["act"]
    assert readmodel.open_entry(instance("a")) is None


def _mongo_match(query: dict[str, Any], doc: dict[str, Any]) -> bool:
    """The few operators the read model's filters use, evaluated on a document."""
    for key, want in query.items():
        if key == "$and":
            if not all(_mongo_match(q, doc) for q in want):
                return False
            continue
        if key == "ancestors.id":
            ids = readmodel.ancestor_gdrs(doc)
            ok = bool(set(want["$in"]) & set(ids)) if isinstance(want, dict) else want in ids
        elif isinstance(want, dict) and "$size" in want:
            ok = len(doc.get(key) or []) == want["$size"]
        elif isinstance(want, dict) and "$ne" in want:
            ok = doc.get(key) is not None
        else:
            ok = doc.get(key) == want
        if not ok:
            return False
    return True


FAMILY = [
    instance("root"), instance("root.c1", ROOT, completedAt="t"),
    instance("root.c2", ROOT, completedAt="t", abortedAt="t"),
    instance("root.c1.g", ROOT, CHILD), instance("other"),
]


@pytest.mark.parametrize("conditions", [
    {}, {"status": "active"}, {"status": "completed"}, {"status": "aborted"},
    {"roots_only": True}, {"root": ROOT}, {"parent": CHILD}, {"parent": ROOT},
    {"parent": ROOT, "root": ROOT}, {"parent": CHILD, "status": "active"},
])  # fmt: skip
def test_filter_and_matcher_agree(conditions: dict[str, Any]) -> None:
    depth = {ROOT: 0, CHILD: 1}
    parent = conditions.get("parent")
    query = readmodel.instance_filter(
        **{**conditions, "parent": (parent, depth[parent]) if parent else None})
    assert query is not None
    by_filter = [d["_id"] for d in FAMILY if _mongo_match(query, d)]
    by_matcher = [d["_id"] for d in FAMILY if readmodel.instance_matches(d, **conditions)]
    assert by_filter == by_matcher


def test_a_root_is_nobodys_child() -> None:
    assert readmodel.instance_filter(roots_only=True, root=ROOT) is None
    assert readmodel.instance_filter(roots_only=True, parent=(ROOT, 0)) is None


def test_children_of_several_parents_sort_by_last_ancestor() -> None:
    query = readmodel.children_of_any_filter([ROOT, CHILD])
    found = [d for d in FAMILY if _mongo_match(query, d)]
    assert {d["_id"]: readmodel.parent_gdr(d) for d in found} == {
        "root.c1": ROOT, "root.c2": ROOT, "root.c1.g": CHILD}
    assert readmodel.parent_gdr(instance("root")) is None


def test_live_children_by_the_parent_hint() -> None:
    kids = [instance("k1", parentInstance="p"), instance("k2", parentInstance="p", completedAt="t"),
            instance("k3", parentInstance="q")]  # fmt: skip
    query = readmodel.live_children_filter("p")
    assert [d["_id"] for d in kids if _mongo_match(query, d)] == ["k1"]
