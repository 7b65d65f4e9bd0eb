"""Pure: the four repair flags folded into the one indexed ``owing`` field."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core.owing import FLAGS, owed_query, owing_of, values_with
from kinflow.core.state import Instance


def instance(**flags: Any) -> Instance:
    return Instance.model_validate({
        "_id": "p", "dataset": "production", "definition": "p", "pinnedVersion": 1,
        "definitionSnapshot": "{}", "currentStage": "review", "startedAt": "x",
        "lastChangedAt": "x", **flags})


def test_owing_names_the_set_flags_in_one_order() -> None:
    assert owing_of({}) is None
    assert owing_of({"owesAborts": None, "materialising": False}) is None
    assert owing_of({"owesCancels": True, "materialising": True}) == "materialising owesCancels"
    assert owing_of(dict.fromkeys(FLAGS, True)) == " ".join(FLAGS)


@pytest.mark.parametrize("flag", FLAGS)
def test_the_query_for_a_flag_matches_exactly_the_values_that_hold_it(flag: str) -> None:
    values = set(values_with(flag))
    assert len(values) == 2 ** (len(FLAGS) - 1)
    every = {owing_of(dict.fromkeys(chosen, True))
             for mask in range(1, 2 ** len(FLAGS))
             for chosen in [[f for i, f in enumerate(FLAGS) if mask >> i & 1]]}
    assert values == {value for value in every if value and flag in value.split()}
    assert owed_query(flag) == {"owing": {"$gt": "", "$in": values_with(flag)}}


def test_a_query_for_an_unknown_flag_is_refused() -> None:
    with pytest.raises(ValueError):
        owed_query("propagateTo")


def test_the_stored_document_derives_owing_from_the_flags() -> None:
    assert "owing" not in instance().stored_json()
    assert instance(owesAborts=True, owesBulk=True).stored_json()["owing"] == (
        "owesBulk owesAborts")
    stale = instance(owing="materialising owesAborts", owesAborts=True)  # as loaded
    assert stale.stored_json()["owing"] == "owesAborts"
    cleared = instance(owing="owesCancels")
    assert "owing" not in cleared.stored_json()
    assert instance(owesAborts=True).to_document()["owing"] == "owesAborts"
