"""Trace links across a family, through the SDK's in-memory exporter: each member of a
grouped commit keeps operation -> verb -> commit -> its lake writes in its own trace,
linked to the group's transaction, and a parent's propagation round links to the
children whose completions it stamped (at most ``OBSERVED_LINKS`` per commit span)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pymongo import MongoClient

from kinflow.observability import engine as observing
from kinflow.observability import grouping, tracing
from kinflow.observability.switch import ON
from tests.observability import cohort
from tests.observability.span_tree import by_id, key, links, named, parent_of
from tests.reliability.api import client, gql, serving

CHILDREN = 16  # fired at once: more than the two group flights, so groups form


async def ok(http: httpx.AsyncClient, query: str,
             variables: dict[str, Any] | None = None) -> dict[str, Any]:
    status, body = await gql(http, query, variables)
    assert status == 200 and not body.get("errors"), body
    found: dict[str, Any] = body["data"]
    return found


async def spawn(http: httpx.AsyncClient, lake: MongoClient[dict[str, Any]], database: str
                ) -> tuple[str, list[str]]:
    await ok(http, cohort.DEPLOY, {"d": [cohort.CHILD, cohort.PARENT]})
    for number in range(CHILDREN):
        await ok(http, cohort.PUT, {"d": {"_id": f"item-{number}", "_type": "obs-item"}})
    parent: str = (await ok(http, cohort.START))["startInstance"]["instance"]["id"]
    children = sorted(doc["_id"] for doc in lake[database]["production"].find(
        {"parentInstance": parent}, {"_id": 1}))
    assert len(children) == CHILDREN
    return parent, children


async def test_grouped_fires_keep_whole_traces_and_the_rounds_link_the_children(
        spans: InMemorySpanExporter, lake_uri: str, database: str) -> None:
    lake: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    try:
        async with serving(lake_uri, database) as app, client(app) as http:
            parent, children = await spawn(http, lake, database)
            spawned = list(spans.get_finished_spans())
            spans.clear()
            await asyncio.gather(*(ok(http, cohort.FIRE, {"id": c}) for c in children))
            stage = await ok(http, cohort.STAGE, {"id": parent})
            assert stage["instance"]["currentStage"] == "over"
        # every owed stamp was honoured, and its trace context went with it
        assert lake[database]["production"].count_documents(
            {"parentInstance": parent, observing.PROPAGATE_TRACE: {"$exists": True}}) == 0
    finally:
        lake.close()
    fired = list(spans.get_finished_spans())
    index = by_id(fired)
    fire_traces = {s.context.trace_id for s in named(fired, "mutation fireAction")}
    assert len(fire_traces) == CHILDREN
    (creator,) = [s for s in spawned if s.name.startswith("commit ")
                  and any(e.name == "children created" for e in s.events)]

    # a grouped member: operation -> verb -> commit -> its write, in its one trace
    groups = named(fired, "commit groupCommit")
    assert groups, "no fires were grouped"
    members = [s for s in fired if links(s, "group")]
    assert members
    for member in members:
        assert member.name == "commit fireAction"
        assert member.attributes is not None and member.attributes["kinflow.grouped"]
        verb = parent_of(member, index)
        assert verb is not None and verb.name == "verb fireAction"
        operation = parent_of(verb, index)
        assert operation is not None and operation.name == "mutation fireAction"
        assert operation.parent is None
        assert operation.context.trace_id == member.context.trace_id
        assert links(verb, "spawned-by") == {key(creator)}  # read by its group, linked
        (group,) = [g for g in groups if key(g) in links(member, "group")]
        assert key(member) in links(group, "member")  # and back
        # its write: under its own span, or its part of the group's one update statement
        writes = [s for s in fired if s.name == "lake update"
                  and parent_of(s, index) in (member, group)]
        assert writes, member.attributes
        assert group.context.trace_id not in fire_traces
    for group in groups:  # the shared round trips: under the group's transaction
        shared = {s.name for s in fired if parent_of(s, index) is group}
        assert {"lake find", "lake commitTransaction"} <= shared, shared
    for commit in named(fired, "commit fireAction"):  # grouped, alone or ordinary alike
        verb = parent_of(commit, index)
        assert verb is not None and verb.name == "verb fireAction"
        assert commit.context.trace_id in fire_traces

    # the parent's rounds: traces of their own, linking to the commits that owed stamps
    rounds = named(fired, "round propagate")
    assert rounds and all(r.parent is None for r in rounds)
    round_traces = {r.context.trace_id for r in rounds}
    assert not round_traces & fire_traces
    round_commits = [s for s in fired
                     if s.context.trace_id in round_traces and s.name.startswith("commit ")]
    observed: set[tuple[int, int]] = set()
    for commit in round_commits:
        observed |= links(commit, "observed")
    assert fire_traces <= {trace_id for trace_id, _ in observed}  # every child, linked
    known = {key(s): s for s in [*spawned, *fired]}
    for linked in observed:  # each link leads to the child's commit that owed the stamp
        assert linked in known and known[linked].name.startswith("commit ")


def test_a_commit_links_at_most_observed_links_children(spans: InMemorySpanExporter) -> None:
    tracer = tracing.tracer()
    owing: list[dict[str, Any]] = []
    for number in range(observing.OBSERVED_LINKS + 6):
        with tracer.start_as_current_span("commit fireAction"):
            owing.append({"_id": f"child-{number}",
                          observing.PROPAGATE_TRACE: observing.traceparent()})
    owing.append({"_id": "untraced"})  # it changed while tracing was off
    owed_by = list(spans.get_finished_spans())
    with observing.commit("propagate"):
        observing.observed(owing[:10])  # a first attempt, then a retried one reading all
        observing.observed(owing)
    (commit,) = named(spans.get_finished_spans(), "commit propagate")
    assert [(link.context.trace_id, link.context.span_id) for link in commit.links] == [
        key(s) for s in owed_by[:observing.OBSERVED_LINKS]]
    assert commit.attributes is not None
    assert commit.attributes["kinflow.children_observed"] == len(owing)
    assert commit.attributes["kinflow.children_linked"] == observing.OBSERVED_LINKS


def test_a_new_owed_stamp_records_the_commit_that_owed_it(
        spans: InMemorySpanExporter) -> None:
    with tracing.tracer().start_as_current_span("commit fireAction"):
        fresh = {"propagateToken": "b", observing.PROPAGATE_TRACE: "an older change's"}
        observing.owed(fresh, {"propagateToken": "a"})
        same = {"propagateToken": "a", observing.PROPAGATE_TRACE: "kept"}
        observing.owed(same, {"propagateToken": "a"})
        untouched: dict[str, Any] = {"currentStage": "work"}
        observing.owed(untouched, None)
    (span,) = spans.get_finished_spans()
    found = observing.span_context(fresh[observing.PROPAGATE_TRACE])
    assert found is not None and (found.trace_id, found.span_id) == key(span)
    assert same[observing.PROPAGATE_TRACE] == "kept"
    assert untouched == {"currentStage": "work"}


def test_a_malformed_trace_context_links_nothing() -> None:
    good = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    found = observing.span_context(good)
    assert found is not None and (found.trace_id, found.span_id) == (int("a" * 32, 16),
                                                                    int("b" * 16, 16))
    for bad in ("", "00-zz", good.replace("a" * 32, "0" * 32), good.replace("a", "g"),
                good[:-1]):
        assert observing.span_context(bad) is None, bad


def test_with_tracing_off_the_hooks_change_nothing() -> None:
    assert not ON.tracing
    fields = {"_id": 1}
    assert observing.with_trace(fields) is fields
    document = {"propagateToken": "new"}
    observing.owed(document, {"propagateToken": "old"})
    assert document == {"propagateToken": "new"}
    assert grouping.caller("fireAction", "instance-1") is None
    observing.observed([{"_id": "c", observing.PROPAGATE_TRACE: "00-" + "1" * 32 + "-"
                         + "2" * 16 + "-01"}])  # no commit span to link from: nothing
