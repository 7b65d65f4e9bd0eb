"""Pure: the four repair flags folded into the one indexed ``owing`` field."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core.owing import FLAGS, holds, owing_of
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
def test_a_flag_is_held_by_every_value_that_names_it(flag: str) -> None:
    every = [owing_of(dict.fromkeys([f for i, f in enumerate(FLAGS) if mask >> i & 1], True))
             for mask in range(1, 2 ** len(FLAGS))]
    holding = [value for value in every if holds(value, flag)]
    assert len(holding) == 2 ** (len(FLAGS) - 1)
    assert all(flag in str(value) for value in holding)
    assert not holds(None, flag) and not holds("", flag)
    assert not holds("owesAbortsX", "owesAborts")  # names, not substrings


def test_the_stored_document_derives_owing_from_the_flags() -> None:
    assert "owing" not in instance().stored_json()
    assert instance(owesAborts=True, owesBulk=True).stored_json()["owing"] == (
        "owesBulk owesAborts")
    stale = instance(owing="materialising owesAborts", owesAborts=True)  # as loaded
    assert stale.stored_json()["owing"] == "owesAborts"
    cleared = instance(owing="owesCancels")
    assert "owing" not in cleared.stored_json()
    assert instance(owesAborts=True).to_document()["owing"] == "owesAborts"
