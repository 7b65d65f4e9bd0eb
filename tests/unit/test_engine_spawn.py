"""Pure parts of subworkflows: row identity, child ids, targeted patches, observations."""

from __future__ import annotations

import pytest

from kinflow.core.cohort.spawn import child_id, keyed_rows, row_key
from kinflow.core.errors import SpawnRowIdentity
from kinflow.core.patch import diff


@pytest.mark.parametrize(("value", "key"), [
    ({"_key": "k", "_id": "d"}, "k"),
    ({"_id": "d"}, "d"),
    ({"id": "lake:p:doc1", "type": "article"}, "lake:p:doc1"),
    (True, "true"),
    ("de", "de"),
    (1, "1"),
])
def test_scenario_17_row_keys(value: object, key: str) -> None:
    assert row_key(value) == key


@pytest.mark.parametrize("rows", [[{"title": "x"}], [None], [["a"]], ["a", "a"], [1, "1"]])
def test_row_identity_errors(rows: list[object]) -> None:
    with pytest.raises(SpawnRowIdentity):
        keyed_rows(rows)


def test_child_ids_are_deterministic_and_distinct() -> None:
    one = child_id("p", "e1", "translate", "fan-out", "de")
    assert one == child_id("p", "e1", "translate", "fan-out", "de")
    assert one.startswith("instance.c")
    others = {child_id("p", "e2", "translate", "fan-out", "de"),
              child_id("p", "e1", "other", "fan-out", "de"),
              child_id("p", "e1", "translate", "fan-out-2", "de"),
              child_id("p", "e1", "translate", "fan-out", "fr"),
              child_id("q", "e1", "translate", "fan-out", "de")}
    assert one not in others and len(others) == 5
    assert child_id("p", "e1", "translate", "fan-out", "de", {one}) == one + "-2"


def test_diff_pushes_appends_and_sets_changed_rows() -> None:
    before = {"_id": "x", "_rev": "1", "history": [{"_key": "h1"}], "n": 1, "gone": True,
              "subworkflows": [{"_key": "a", "v": 1}, {"_key": "b", "v": 1}]}
    after = {"_id": "x", "history": [{"_key": "h1"}, {"_key": "h2"}], "n": 2,
             "subworkflows": [{"_key": "a", "v": 1}, {"_key": "b", "v": 2}]}
    update, filters = diff(before, after)
    assert update == {"$set": {"n": 2, "subworkflows.1": {"_key": "b", "v": 2}},
                      "$unset": {"gone": ""},
                      "$push": {"history": {"$each": [{"_key": "h2"}]}}}
    assert filters == []
    update, filters = diff(before, after, positional=False)
    assert update["$set"]["subworkflows.$[r0]"] == {"_key": "b", "v": 2}
    assert filters == [{"r0._key": "b"}]


def test_diff_of_equal_documents_is_empty() -> None:
    assert diff({"a": [1]}, {"a": [1]}) == ({}, [])
