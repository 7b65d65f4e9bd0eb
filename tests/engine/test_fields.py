"""Field sources resolved at start and at stage entry, including lake queries."""

from __future__ import annotations

import pytest

from kinflow.engine import Engine
from tests.engine.definitions import simple

pytestmark = pytest.mark.lake

SOURCES = simple("sources", [
    {"name": "a",
     "fields": [{"name": "articles", "type": "number",
                 "initialValue": {"type": "query", "query": "count(*[_type == 'article'])"}}],
     "activities": [{"name": "w", "actions": [{"name": "go", "status": "done"}]}],
     "transitions": [{"name": "t", "to": "b"}]},
    {"name": "b"},
], fields=[
    {"name": "owner", "type": "string", "initialValue": {"type": "input"}},
    {"name": "copy", "type": "string",
     "initialValue": {"type": "fieldRead", "scope": "workflow", "field": "owner"}},
    {"name": "kind", "type": "string", "initialValue": {"type": "literal", "value": "memo"}},
    {"name": "related", "type": "doc.refs", "editable": True},
])


async def test_input_fieldread_literal_and_query_sources(engine: Engine) -> None:
    await engine.lake.create({"_id": "a1", "_type": "article"})
    await engine.lake.create({"_id": "a2", "_type": "article"})
    await engine.deploy([SOURCES])
    instance = (await engine.start_instance("sources", fields={"owner": "ann"})).instance
    values = {f.name: f.value for f in instance.fields}
    assert values == {"owner": "ann", "copy": "ann", "kind": "memo", "related": []}
    stage_field = instance.open_entry().fields[0]
    assert stage_field.value == 2 and stage_field.resolvedAt is not None


async def test_edit_append_normalises_references_and_updates_the_watch_list(
    engine: Engine,
) -> None:
    await engine.deploy([SOURCES])
    iid = (await engine.start_instance("sources")).instance.id_
    edited = await engine.edit_field(iid, "related", "doc-9", mode="append")
    related = edited.instance.fields[3].value
    assert related == [{"id": "lake:production:doc-9"}]
    assert edited.instance.watch == ["lake:production:doc-9"]
    history = edited.instance.history[-1]
    assert history["_type"] == "opApplied" and history["edit"] is True
