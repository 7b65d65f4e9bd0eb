"""The stored instance: parsed at the boundary, tolerant of new keys, strict on its own."""

from __future__ import annotations

import pytest

from kinflow.core.errors import ModelVersionAhead, PersistedDocShape
from kinflow.core.state import MODEL_VERSION, parse_instance
from tests.core.support import definition, start


def stored() -> dict[str, object]:
    document = start(definition("s", [{"name": "a", "transitions": [
        {"name": "t", "to": "b", "when": "false"}]}, {"name": "b"}])).to_json()
    document["_rev"] = "r1"
    return document


def test_a_round_trip_keeps_unknown_keys_and_drops_system_fields_on_write() -> None:
    document = {**stored(), "fromTheFuture": {"x": 1}}
    instance = parse_instance(document)
    assert instance.to_json()["fromTheFuture"] == {"x": 1}
    written = instance.to_document()
    assert "_rev" not in written and written["fromTheFuture"] == {"x": 1}


def test_a_newer_model_is_refused_not_misread() -> None:
    with pytest.raises(ModelVersionAhead) as ahead:
        parse_instance({**stored(), "minReaderModel": MODEL_VERSION + 1})
    assert ahead.value.details["minReaderModel"] == MODEL_VERSION + 1


def test_a_broken_document_is_typed() -> None:
    with pytest.raises(PersistedDocShape) as broken:
        parse_instance({**stored(), "stages": "not a list"})
    assert broken.value.details["issues"][0]["path"].startswith("stages")


def test_derived_facts() -> None:
    instance = parse_instance(stored())
    entry = instance.open_entry()
    assert entry is not None and entry.name == "a"
    assert instance.primed and not instance.terminal
    assert instance.observable == ("active", "a")
    instance.completedAt = instance.abortedAt = "2026-01-01T12:00:00.000Z"
    assert instance.terminal and instance.observable == ("aborted", "a")
    assert instance.parent_id is None
