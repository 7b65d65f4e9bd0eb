"""Field values: kinds checked, references normalised to GDR refs, the watch-set."""

from __future__ import annotations

import pytest

from kinflow.core.errors import FieldValueInvalid
from kinflow.core.fields import checked_value, find_field, read_path, reference_ids
from kinflow.define.models import FieldEntry
from tests.core.support import definition, start


def entry(kind: str, **extra: object) -> FieldEntry:
    return FieldEntry.model_validate({"name": "f", "type": kind, **extra})


def test_values_are_checked_by_kind() -> None:
    assert checked_value(entry("number"), 3, "production") == 3
    assert checked_value(entry("string"), None, "production") is None
    with pytest.raises(FieldValueInvalid) as wrong:
        checked_value(entry("number"), "three", "production")
    assert wrong.value.details == {"field": "f", "kind": "number"}


def test_references_become_gdr_refs() -> None:
    ref = checked_value(entry("doc.ref"), "doc-1", "production")
    assert ref["id"] == "lake:production:doc-1"
    refs = checked_value(entry("doc.refs"), ["a", "lake:other:b"], "production")
    assert [r["id"] for r in refs] == ["lake:production:a", "lake:other:b"]
    with pytest.raises(FieldValueInvalid):
        checked_value(entry("doc.ref"), "lake:", "production")


def test_read_path_and_scoped_lookup_and_watch_set() -> None:
    assert read_path({"a": {"b": 1}}, "a.b") == 1
    assert read_path({"a": 1}, "a.b") is None and read_path(5, None) == 5
    instance = start(definition("w", [
        {"name": "a", "fields": [{"name": "sub", "type": "doc.ref",
                                  "initialValue": {"type": "input"}}],
         "transitions": [{"name": "t", "to": "b", "when": "false"}]},
        {"name": "b"},
    ], fields=[{"name": "refs", "type": "doc.refs", "initialValue": {"type": "input"}}]),
        {"refs": ["x", "y", "x"]})  # fmt: skip
    assert find_field(instance, "workflow", "refs") is not None
    assert find_field(instance, "stage", "refs") is None
    assert reference_ids(instance) == ["lake:production:x", "lake:production:y"]
