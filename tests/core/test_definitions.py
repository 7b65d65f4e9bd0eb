"""The runtime view of a stored definition: deploy stamps and system fields stripped."""

from __future__ import annotations

import json

from kinflow.core.definitions import (
    DEFINITION_TYPE,
    authored,
    definition_id,
    parse_snapshot,
    runtime_definition,
)
from tests.core.support import definition, deployed

RAW = definition("memo", [{"name": "a", "transitions": [{"name": "t", "to": "b"}]},
                          {"name": "b"}])  # fmt: skip


def stored() -> dict[str, object]:
    return {**deployed(RAW), "_type": DEFINITION_TYPE, "_rev": "r1", "modelVersion": 1,
            "deployedAt": "2026-01-01T00:00:00.000Z"}


def test_a_stored_definition_reads_as_its_authored_model() -> None:
    doc = stored()
    assert definition_id("memo", 3) == "definition.memo.v3"
    plain = authored(doc)
    assert not {"_id", "_type", "_rev", "version", "contentHash", "modelVersion",
                "deployedAt"} & set(plain)  # fmt: skip
    model = runtime_definition(doc)
    assert model.name == "memo" and [s.name for s in model.stages] == ["a", "b"]
    assert runtime_definition(plain) == model


def test_a_snapshot_is_parsed_once_per_text() -> None:
    text = json.dumps(stored())
    first = parse_snapshot(text)
    assert parse_snapshot(text) is first
    assert first == runtime_definition(stored())
