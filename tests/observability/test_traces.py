"""Spans through the SDK's in-memory exporter: operation -> verb -> commit -> lake, the
link from a child's spans to the spawn that created it, and the parent's round to the child."""

from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.testclient import TestClient

from kinflow.http.app import create_app
from tests.api.conftest import make_settings
from tests.observability import cohort
from tests.observability.span_tree import parent_of


def test_one_child_fire_is_one_trace_linked_to_its_spawn(
        spans: InMemorySpanExporter, lake_uri: str, database: str) -> None:
    with TestClient(create_app(make_settings(lake_uri, database))) as client:
        _, children = cohort.spawn(client, lake_uri, database, 2)
        spawned = list(spans.get_finished_spans())
        spans.clear()
        cohort.fire(client, children[0])
        fired = list(spans.get_finished_spans())

    (operation,) = [s for s in fired if s.name == "mutation fireAction"]
    trace_id = operation.context.trace_id
    in_trace = [s for s in fired if s.context.trace_id == trace_id]
    by_id = {s.context.span_id: s for s in in_trace}
    (verb,) = [s for s in in_trace if s.name == "verb fireAction"
               and s.attributes is not None
               and s.attributes.get("kinflow.instance_id") == children[0]]
    assert parent_of(verb, by_id) is operation
    commits = [s for s in in_trace if s.name == "commit fireAction"
               and parent_of(s, by_id) is verb]
    assert commits
    lake = [s for s in in_trace if s.name.startswith("lake ")
            and parent_of(s, by_id) in commits]
    names = {s.name for s in lake}
    assert {"lake find", "lake commitTransaction"} <= names, names
    assert all(s.attributes and s.attributes["db.system"] == "mongodb" for s in lake)

    # the child records the spawn's commit; its verb span links there
    creators = [s for s in spawned if s.name.startswith("commit ")
                and any(e.name == "children created" for e in s.events)]
    assert len(creators) == 1
    (creator,) = creators
    links = [link.context for link in verb.links]
    assert [(c.trace_id, c.span_id) for c in links] == [
        (creator.context.trace_id, creator.context.span_id)]
    assert creator.context.trace_id != trace_id  # the spawn's own trace
    (spawn_operation,) = [s for s in spawned if s.name == "mutation startInstance"]
    assert spawn_operation.context.trace_id == creator.context.trace_id

    # the parent's round (a trace of its own) links to the child's commit that owed it
    rounds = [s for s in fired if s.name == "round propagate"]
    assert rounds and all(r.parent is None and r.context.trace_id != trace_id for r in rounds)
    in_rounds = {r.context.trace_id for r in rounds}
    observed = {(link.context.trace_id, link.context.span_id) for s in fired
                if s.context.trace_id in in_rounds and s.name.startswith("commit ")
                for link in s.links
                if link.attributes and link.attributes.get("kinflow.link") == "observed"}
    owing = {(s.context.trace_id, s.context.span_id) for s in in_trace
             if s.name.startswith("commit ")}
    assert observed and observed <= owing
