"""A finished family stays visible, cohort events come once, instance streams end.

Each test drives the canonical article review (a translation cohort spawned
on submit) through HTTP and a websocket only.
"""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import canonical_definitions, data, error_code, gql
from tests.api.test_subscriptions import INSTANCE_CHANGED, socket

pytestmark = pytest.mark.lake

FIRE = """mutation($i: ID!, $a: String!, $x: String!) {
  fireAction(instanceId: $i, activity: $a, action: $x) { instance { currentStage status } } }"""
COHORT = """query($p: ID!, $a: String!) { cohort(parentId: $p, activity: $a) {
  total active done aborted settled rows { rowKey status current } } }"""
COHORT_CHANGED = """subscription($p: ID!, $a: String!) { cohortChanged(parentId: $p, activity: $a)
  { total active done aborted settled } }"""


def review_with_cohort(client: TestClient) -> tuple[str, dict[str, str]]:
    """A started review whose `translate` cohort (de, es, fr) has been spawned."""
    data(gql(client, "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }",
             {"d": canonical_definitions()}))  # fmt: skip
    data(gql(client, """mutation { putDocument(document: {_id: "article-1", _type: "article",
        title: "Fan-out", locales: ["de", "fr", "es"]}) }"""))  # fmt: skip
    started = data(gql(client, """mutation { startInstance(definition: "article-review",
        fields: {subject: "article-1"}) { instance { id } } }"""))  # fmt: skip
    parent: str = started["startInstance"]["instance"]["id"]
    data(gql(client, FIRE, {"i": parent, "a": "write", "x": "submit"}))
    rows = data(gql(client, """query($i: ID!) { instance(id: $i) { subworkflows(
        activity: "translate") { rowKey childId } } }""", {"i": parent}))  # fmt: skip
    return parent, {r["rowKey"]: r["childId"] for r in rows["instance"]["subworkflows"]}


def cohort(client: TestClient, parent: str, activity: str = "translate") -> dict[str, Any]:
    found: dict[str, Any] = data(gql(client, COHORT, {"p": parent, "a": activity}))["cohort"]
    return found


def counts(c: dict[str, Any]) -> tuple[int, int, int, int, bool]:
    return c["total"], c["active"], c["done"], c["aborted"], c["settled"]


def test_a_published_parents_cohort_still_answers(client: TestClient) -> None:
    parent, children = review_with_cohort(client)
    for child in children.values():
        data(gql(client, FIRE, {"i": child, "a": "translate", "x": "submit"}))
    for _ in range(200):  # propagation stamps the parent
        if cohort(client, parent)["settled"]:
            break
    data(gql(client, FIRE, {"i": parent, "a": "approve", "x": "approve"}))
    final = cohort(client, parent)
    assert counts(final) == (3, 0, 3, 0, True)
    assert sorted(r["rowKey"] for r in final["rows"]) == ["de", "es", "fr"]
    assert {r["current"] for r in final["rows"]} == {False}  # the visit is over; still shown
    with socket(client) as ws:
        ws.subscribe(COHORT_CHANGED, {"p": parent, "a": "translate"})
        assert counts(ws.next()["data"]["cohortChanged"]) == (3, 0, 3, 0, True)


def test_an_aborted_parents_cohort_still_answers(client: TestClient) -> None:
    parent, _children = review_with_cohort(client)
    data(gql(client, """mutation($i: ID!) { abortInstance(instanceId: $i, reason: "stop")
        { changed } }""", {"i": parent}))  # fmt: skip
    after = cohort(client, parent)
    assert after["total"] == 3 and sorted(r["rowKey"] for r in after["rows"]) == ["de", "es", "fr"]
    with socket(client) as ws:
        ws.subscribe(COHORT_CHANGED, {"p": parent, "a": "translate"})
        assert ws.next()["data"]["cohortChanged"]["total"] == 3


def test_an_unknown_activity_is_cohort_not_found(client: TestClient) -> None:
    parent, _children = review_with_cohort(client)
    refused = gql(client, COHORT, {"p": parent, "a": "tranlsate"})
    assert error_code(refused) == "cohort-not-found"
    details = refused["errors"][0]["extensions"]["details"]
    assert details["activity"] == "tranlsate" and "translate" in details["activities"]
    assert counts(cohort(client, parent, "approve")) == (0, 0, 0, 0, False)  # known, no spawn
    with socket(client) as ws:
        op = ws.subscribe(COHORT_CHANGED, {"p": parent, "a": "tranlsate"})
        message = ws.receive()
        assert message["id"] == op
        assert message["payload"]["errors"][0]["extensions"]["code"] == "cohort-not-found"
        assert ws.receive() == {"id": op, "type": "complete"}


def test_cohort_changed_sends_each_change_once(client: TestClient) -> None:
    parent, children = review_with_cohort(client)
    with socket(client) as ws:
        ws.subscribe(COHORT_CHANGED, {"p": parent, "a": "translate"})
        assert counts(ws.next()["data"]["cohortChanged"]) == (3, 3, 0, 0, False)
        seen = []
        for key in ("de", "fr", "es"):
            data(gql(client, FIRE, {"i": children[key], "a": "translate", "x": "submit"}))
            seen.append(counts(ws.next()["data"]["cohortChanged"]))
        # the parent's stamp of each finished child changed nothing the event shows
        assert seen == [(3, 2, 1, 0, False), (3, 1, 2, 0, False), (3, 0, 3, 0, True)]
        data(gql(client, FIRE, {"i": parent, "a": "approve", "x": "approve"}))
        ws.ping()  # the parent's own moves are no cohort change: nothing queued before the pong


def test_instance_changed_ends_after_the_terminal_event(client: TestClient) -> None:
    parent, _children = review_with_cohort(client)
    with socket(client) as ws:
        op = ws.subscribe(INSTANCE_CHANGED, {"id": parent})
        assert ws.next()["data"]["instanceChanged"]["kind"] == "snapshot"
        data(gql(client, """mutation($i: ID!) { abortInstance(instanceId: $i, reason: "stop")
            { changed } }""", {"i": parent}))  # fmt: skip
        kinds = []
        message = ws.receive()
        while message["type"] == "next":
            kinds.append(message["payload"]["data"]["instanceChanged"]["kind"])
            message = ws.receive()
        assert message == {"id": op, "type": "complete"}
        assert kinds[-1] == "aborted" and "changed" not in kinds[kinds.index("aborted"):]
        again = ws.subscribe(INSTANCE_CHANGED, {"id": parent})  # already finished
        assert ws.next()["data"]["instanceChanged"]["kind"] == "snapshot"
        assert ws.receive() == {"id": again, "type": "complete"}


ROOTS = """query($after: String) { instances(where: {rootsOnly: true}, first: 2, after: $after,
  newestFirst: true) { totalCount nodes { id definition } pageInfo { hasNextPage endCursor } } }"""


def test_roots_only_newest_first_pages_down(client: TestClient) -> None:
    first, _children = review_with_cohort(client)
    start = """mutation { startInstance(definition: "article-review",
        fields: {subject: "article-1"}) { instance { id } } }"""
    later = [data(gql(client, start))["startInstance"]["instance"]["id"] for _ in range(2)]
    page = data(gql(client, ROOTS))["instances"]
    assert page["totalCount"] == 3 and page["pageInfo"]["hasNextPage"]
    rest = data(gql(client, ROOTS, {"after": page["pageInfo"]["endCursor"]}))["instances"]
    ids = [n["id"] for n in page["nodes"] + rest["nodes"]]
    assert ids == [later[1], later[0], first]  # started instances have time-ordered ids
    assert not rest["pageInfo"]["hasNextPage"]
    every = data(gql(client, "{ instances(first: 100) { totalCount } }"))["instances"]
    assert every["totalCount"] == 6  # the three translations are there, just not roots
    refused = gql(client, """query($p: ID!) { instances(where: {rootsOnly: true, parentId: $p})
        { totalCount } }""", {"p": first})  # fmt: skip
    assert data(refused)["instances"]["totalCount"] == 0
    with socket(client) as ws:
        ws.subscribe("""subscription { instancesChanged(where: {rootsOnly: true})
            { kind instance { id } } }""")  # fmt: skip
        snapshot = sorted(ws.next()["data"]["instancesChanged"]["instance"]["id"] for _ in ids)
        assert snapshot == sorted(ids)
        child = data(gql(client, """query($i: ID!) { instance(id: $i) { subworkflows {
            childId } } }""", {"i": first}))["instance"]["subworkflows"][0]["childId"]  # fmt: skip
        data(gql(client, FIRE, {"i": child, "a": "translate", "x": "submit"}))
        data(gql(client, FIRE, {"i": later[0], "a": "write", "x": "submit"}))
        moved = ws.next()["data"]["instancesChanged"]["instance"]["id"]
        assert moved in ids  # the finished child was no event here; the next root's move was


def test_instances_changed_sends_nothing_after_a_terminal_event(client: TestClient) -> None:
    parent, children = review_with_cohort(client)
    with socket(client) as ws:
        ws.subscribe("""subscription($p: ID!) { instancesChanged(where: {parentId: $p})
            { kind instance { id status } } }""", {"p": parent})  # fmt: skip
        for _ in children:
            assert ws.next()["data"]["instancesChanged"]["kind"] == "snapshot"
        seen = []
        for key in ("de", "fr"):  # each finish is followed by the parent's stamp on it
            data(gql(client, FIRE, {"i": children[key], "a": "translate", "x": "submit"}))
            event = ws.next()["data"]["instancesChanged"]
            seen.append((event["kind"], event["instance"]["id"]))
        assert seen == [("completed", children["de"]), ("completed", children["fr"])]
