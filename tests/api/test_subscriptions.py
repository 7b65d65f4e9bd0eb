"""Every subscription of the API over websockets (both protocols), fed by the change hub."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from starlette.testclient import TestClient

from kinflow.core.cohort.registry import subworkflow_rows
from kinflow.core.state import parse_instance
from tests.api.conftest import data, gql
from tests.api.families import build_family, stamp, stored_parent
from tests.api.test_mutations import KITCHEN, deploy, fire, start

pytestmark = pytest.mark.lake
ROW = "row { rowKey activity action status stage current childId child { id currentStage } }"


class Socket:
    """A graphql-transport-ws (or legacy graphql-ws) client over the TestClient."""

    def __init__(self, client: TestClient, ws: Any, protocol: str) -> None:
        self.client, self.ws, self.protocol = client, ws, protocol
        self.next_id = 0

    def subscribe(self, query: str, variables: dict[str, Any] | None = None) -> str:
        self.next_id += 1
        op = str(self.next_id)
        kind = "subscribe" if self.protocol == "graphql-transport-ws" else "start"
        self.ws.send_json({"id": op, "type": kind,
                           "payload": {"query": query, "variables": variables or {}}})
        return op

    def receive(self) -> dict[str, Any]:
        message: dict[str, Any] = self.ws.receive_json()
        return message

    def next(self) -> dict[str, Any]:
        """The payload of the next data message."""
        message = self.receive()
        assert message["type"] in ("next", "data"), message
        payload: dict[str, Any] = message["payload"]
        return payload

    def ping(self) -> None:
        self.ws.send_json({"type": "ping"})
        assert self.receive() == {"type": "pong"}

    def wait_registered(self, count: int) -> None:
        """Until the hub has ``count`` subscribers (the resolver registered before reading)."""
        hubs = self.client.app.state.hubs  # type: ignore[attr-defined]
        for _ in range(10_000):
            if hubs.subscriber_count() >= count:
                return
            self.ping()
        raise AssertionError("the subscription never registered with the hub")


@contextmanager
def socket(client: TestClient, protocol: str = "graphql-transport-ws") -> Iterator[Socket]:
    with client.websocket_connect("/graphql", subprotocols=[protocol]) as ws:
        ws.send_json({"type": "connection_init", "payload": {}})
        assert ws.receive_json()["type"] == "connection_ack"
        yield Socket(client, ws, protocol)


INSTANCE_CHANGED = """subscription($id: ID!) { instanceChanged(id: $id) {
  kind at instance { id status currentStage fields } } }"""


def test_instance_changed_snapshot_then_commits(client: TestClient) -> None:
    data(deploy(client, KITCHEN))
    iid = start(client, id="k-1")["instance"]["id"]
    with socket(client) as ws:
        op = ws.subscribe(INSTANCE_CHANGED, {"id": iid})
        first = ws.next()["data"]["instanceChanged"]
        assert first["kind"] == "snapshot" and first["instance"]["fields"]["n"] == 0
        data(fire(client, iid, "w", "bump"))
        bumped = ws.next()["data"]["instanceChanged"]
        assert bumped["kind"] == "changed" and bumped["instance"]["fields"]["n"] == 1
        data(gql(client, 'mutation { abortInstance(instanceId: "k-1") { changed } }'))
        aborted = ws.next()["data"]["instanceChanged"]
        assert aborted["kind"] == "aborted" and aborted["instance"]["status"] == "ABORTED"
        assert ws.receive() == {"id": op, "type": "complete"}  # the terminal event is the last
        missing = ws.subscribe(INSTANCE_CHANGED, {"id": "nope"})
        refused = ws.receive()
        assert refused["id"] == missing
        assert refused["payload"]["errors"][0]["extensions"]["code"] == "instance-not-found"
        assert ws.receive() == {"id": missing, "type": "complete"}


def test_legacy_graphql_ws_protocol(client: TestClient) -> None:
    data(deploy(client, KITCHEN))
    iid = start(client)["instance"]["id"]
    with socket(client, "graphql-ws") as ws:
        op = ws.subscribe(INSTANCE_CHANGED, {"id": iid})
        assert ws.next()["data"]["instanceChanged"]["kind"] == "snapshot"
        data(fire(client, iid, "w", "go"))
        moved = ws.next()["data"]["instanceChanged"]
        while moved["instance"]["currentStage"] != "b":
            moved = ws.next()["data"]["instanceChanged"]
        ws.ws.send_json({"id": op, "type": "stop"})
        ended = ws.receive()
        while ended["type"] == "data":  # events already in flight when stop was sent
            ended = ws.receive()
        assert ended == {"id": op, "type": "complete"}


def test_child_changed_snapshot_rows_then_each_status_or_stage_change(
    client: TestClient, lake_uri: str, database: str
) -> None:
    children = build_family(client, lake_uri, database, "p-1", ["de", "fr", "es"])
    with socket(client) as ws:
        ws.subscribe(f"""subscription {{ childChanged(parentId: "p-1") {{ kind parentId at
            {ROW} }} }}""")  # fmt: skip
        snapshot = [ws.next()["data"]["childChanged"] for _ in children]
        assert [e["kind"] for e in snapshot] == ["snapshot"] * 3
        assert [e["row"]["rowKey"] for e in snapshot] == ["de", "fr", "es"]
        assert all(e["row"]["status"] == "ACTIVE" and e["row"]["current"] for e in snapshot)
        assert snapshot[0]["row"]["child"]["id"] == children[0]
        data(fire(client, children[1], "translate", "give-up"))
        event = ws.next()["data"]["childChanged"]
        assert (event["kind"], event["parentId"]) == ("completed", "p-1")
        assert event["row"]["rowKey"] == "fr" and event["row"]["stage"] == "abandoned"
        assert event["row"]["status"] == "DONE"  # completed normally, in a failure stage


def test_child_completed_delivers_each_finished_child_once(
    client: TestClient, lake_uri: str, database: str
) -> None:
    children = build_family(client, lake_uri, database, "p-2", ["de", "fr", "es"])
    with socket(client) as ws:
        ws.subscribe(f'subscription {{ childCompleted(parentId: "p-2") {{ kind {ROW} }} }}')
        ws.subscribe('subscription { childCompleted(parentId: "p-2", activity: "other") '
                     "{ kind } }")  # fmt: skip
        ws.wait_registered(2)
        for child in children:
            data(fire(client, child, "translate", "submit"))
        events = [ws.next()["data"]["childCompleted"] for _ in children]
        assert sorted(e["row"]["rowKey"] for e in events) == ["de", "es", "fr"]
        assert {(e["kind"], e["row"]["status"], e["row"]["stage"]) for e in events} == {
            ("completed", "DONE", "done")}
        stamp(lake_uri, database, "p-2", "row-de", {"resolved": {"at": "2026-01-01T00:00:00Z",
                                                                 "stage": "done"}})
        ws.ping()  # no fourth event (nor any for the other activity) is queued ahead of pong
    with socket(client) as late:
        late.subscribe(f'subscription {{ childCompleted(parentId: "p-2") {{ kind {ROW} }} }}')
        replay = [late.next()["data"]["childCompleted"] for _ in children]
        assert {e["kind"] for e in replay} == {"snapshot"}


def test_cohort_changed_and_the_cohort_query_agree_with_the_engine(
    client: TestClient, lake_uri: str, database: str
) -> None:
    children = build_family(client, lake_uri, database, "p-3", ["de", "fr", "es"])
    with socket(client) as ws:
        ws.subscribe('subscription { cohortChanged(parentId: "p-3", activity: "translate") '
                     "{ total active done aborted settled rows { rowKey status } } }")
        first = ws.next()["data"]["cohortChanged"]
        assert (first["total"], first["active"], first["settled"]) == (3, 3, False)
        data(fire(client, children[0], "translate", "submit"))
        progressed = ws.next()["data"]["cohortChanged"]
        assert (progressed["active"], progressed["done"]) == (2, 1)
        data(fire(client, children[1], "translate", "submit"))
        later = ws.next()["data"]["cohortChanged"]
        while later["done"] < 2:  # propagation's stamp on the parent is a change too
            assert (later["active"], later["done"]) == (2, 1)
            later = ws.next()["data"]["cohortChanged"]
        assert (later["active"], later["settled"]) == (1, False)

    stamped = '{ cohort(parentId: "p-3", activity: "translate") { done } }'
    for _ in range(1000):  # propagation has stamped both finished children on the parent
        if data(gql(client, stamped))["cohort"]["done"] == 2:
            break
    # an abort owed to the last child, as a parent abort or a stage exit records it
    stamp(lake_uri, database, "p-3", "row-es", {"abortPending": {
        "at": "2026-01-01T00:00:00.000Z", "reason": "parent aborted"}})
    cohort = data(gql(client, """{ cohort(parentId: "p-3", activity: "translate") { total
        active done settled rows { rowKey activity action definition current status stage
        spawnedAt condemned abortReason resolvedAt childId child { id } } } }"""))["cohort"]
    view = data(gql(client, """{ instance(id: "p-3") { subworkflows { rowKey status }
        done: subworkflows(status: DONE) { rowKey } } }"""))["instance"]  # fmt: skip
    instance = parse_instance(stored_parent(lake_uri, database, "p-3"))
    engine_rows = subworkflow_rows(instance, instance.open_entry())
    assert [(r["rowKey"], r["status"].upper(), r["stage"], r["current"], r["_id"])
            for r in engine_rows] == [
        (r["rowKey"], r["status"], r["stage"], r["current"], r["childId"])
        for r in cohort["rows"]]  # fmt: skip
    assert [r["rowKey"] for r in view["subworkflows"]] == [r["rowKey"] for r in engine_rows]
    assert view["done"] == [{"rowKey": "de"}, {"rowKey": "fr"}]
    assert (cohort["total"], cohort["done"], cohort["active"]) == (3, 2, 1)
    es = cohort["rows"][2]
    assert es["condemned"] is True and es["abortReason"] == "parent aborted"
    assert es["child"] == {"id": children[2]} and es["definition"] == "leaf"
    assert es["resolvedAt"] is None and cohort["rows"][0]["condemned"] is False


def test_instances_changed_follows_a_filter(client: TestClient, lake_uri: str, database: str
                                            ) -> None:
    children = build_family(client, lake_uri, database, "p-4", ["de", "fr"])
    with socket(client) as ws:
        ws.subscribe("""subscription { instancesChanged(where: {parentId: "p-4",
            status: ACTIVE}) { kind instance { id status } } }""")  # fmt: skip
        snapshot = [ws.next()["data"]["instancesChanged"] for _ in children]
        assert sorted(e["instance"]["id"] for e in snapshot) == sorted(children)
        data(fire(client, children[0], "translate", "submit"))
        left = ws.next()["data"]["instancesChanged"]
        while left["kind"] != "completed":
            left = ws.next()["data"]["instancesChanged"]
        assert left["instance"] == {"id": children[0], "status": "COMPLETED"}
    query = "query($w: InstanceFilter) { instances(where: $w) { totalCount nodes { id } } }"
    for where in ({"parentId": "p-4"}, {"rootId": "p-4"}, {"rootId": "p-4", "parentId": "p-4"}):
        found = data(gql(client, query, {"w": where}))["instances"]
        assert sorted(n["id"] for n in found["nodes"]) == sorted(children), where
    active = data(gql(client, query, {"w": {"parentId": "p-4", "status": "ACTIVE"}}))
    assert [n["id"] for n in active["instances"]["nodes"]] == [children[1]]
    family = data(gql(client, """{ instance(id: "p-4") { children { id parent { id }
        ancestors { id } } active: children(status: ACTIVE) { id } } }"""))["instance"]
    assert sorted(c["id"] for c in family["children"]) == sorted(children)
    assert {c["parent"]["id"] for c in family["children"]} == {"p-4"}
    assert family["children"][0]["ancestors"] == [{"id": "p-4"}]
    assert family["active"] == [{"id": children[1]}]


def test_document_changed(client: TestClient) -> None:
    with socket(client) as ws:
        ws.subscribe('subscription { documentChanged(id: "article-1") }')
        assert ws.next()["data"]["documentChanged"] is None
        data(gql(client, 'mutation { putDocument(document: {_id: "article-1", _type: "article",'
                         ' title: "One"}) }'))  # fmt: skip
        assert ws.next()["data"]["documentChanged"]["title"] == "One"
        data(gql(client, 'mutation { deleteDocument(id: "article-1") }'))
        assert ws.next()["data"]["documentChanged"] is None


def test_shutdown_ends_open_subscriptions(client: TestClient) -> None:
    data(deploy(client, KITCHEN))
    iid = start(client)["instance"]["id"]
    with socket(client) as ws:
        op = ws.subscribe(INSTANCE_CHANGED, {"id": iid})
        assert ws.next()["data"]["instanceChanged"]["kind"] == "snapshot"
        client.portal.call(client.app.state.hubs.stop)  # type: ignore[attr-defined,union-attr]
        assert ws.receive() == {"id": op, "type": "complete"}
