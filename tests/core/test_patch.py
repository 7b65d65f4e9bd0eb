"""Targeted writes: the smallest update operators that turn one document into another."""

from __future__ import annotations

from typing import Any

from kinflow.core.patch import MAX_FILTERS, diff


def rows(*values: int) -> list[dict[str, Any]]:
    return [{"_key": f"r{i}", "v": v} for i, v in enumerate(values)]


def test_unchanged_keys_and_system_fields_are_left_alone() -> None:
    before = {"_id": "a", "_rev": "1", "n": 1, "gone": True}
    after = {"_id": "a", "_rev": "2", "n": 1}
    assert diff(before, after) == ({"$unset": {"gone": ""}}, [])


def test_a_grown_array_is_pushed() -> None:
    before = {"history": [{"_key": "h0"}]}
    after = {"history": [{"_key": "h0"}, {"_key": "h1"}, {"_key": "h2"}]}
    assert diff(before, after) == ({"$push": {"history": {"$each": [{"_key": "h1"},
                                                                    {"_key": "h2"}]}}}, [])


def test_changed_keyed_rows_are_set_one_by_one() -> None:
    before, after = {"rows": rows(1, 2, 3)}, {"rows": rows(1, 9, 3)}
    assert diff(before, after) == ({"$set": {"rows.1": {"_key": "r1", "v": 9}}}, [])
    update, filters = diff(before, after, positional=False)
    assert update == {"$set": {"rows.$[r0]": {"_key": "r1", "v": 9}}}
    assert filters == [{"r0._key": "r1"}]


def test_anything_else_is_set_whole() -> None:
    assert diff({"rows": rows(1, 2)}, {"rows": rows(2)}) == ({"$set": {"rows": rows(2)}}, [])
    assert diff({"x": [1, 2]}, {"x": [2, 2]}) == ({"$set": {"x": [2, 2]}}, [])
    assert diff({}, {"new": 1}) == ({"$set": {"new": 1}}, [])


def test_too_many_changed_rows_fall_back_to_one_set() -> None:
    count = MAX_FILTERS + 1
    before = {"rows": rows(*range(count))}
    after = {"rows": rows(*(v + 1 for v in range(count)))}
    update, filters = diff(before, after, positional=False)
    assert update == {"$set": {"rows": after["rows"]}} and filters == []
