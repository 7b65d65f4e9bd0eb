"""cancelInstance through the API: CANCELLING with rows cancelling, the cleanup effects
completed by a caller, childCompleted for CANCELLED rows, refusals and the operator role."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from kinflow.define.loading import load_definitions
from tests.api.conftest import ROOT, data, error_code, gql
from tests.api.test_subscriptions import socket

pytestmark = pytest.mark.lake

SEATS = ("A1", "A2")
CANCEL = """mutation($i: ID!, $r: String) { cancelInstance(instanceId: $i, reason: $r) {
  changed instance { status currentStage subworkflows { rowKey status cancelling } } } }"""
INSTANCE = """query($i: ID!) { instance(id: $i) { status currentStage cancellingAt cancelledAt
  cancelReason pendingEffects { key name } } }"""


def booking(client: TestClient, token: str | None = None) -> tuple[str, dict[str, str]]:
    definitions = load_definitions(ROOT / "examples" / "definitions" / "seat-booking.json")
    data(gql(client, "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }",
             {"d": definitions}, token=token))  # fmt: skip
    started = data(gql(client, """mutation($f: JSON) { startInstance(definition:
        "event-booking", fields: $f) { instance { id subworkflows { rowKey childId } } } }""",
                       {"f": {"seats": [{"seat": s} for s in SEATS]}}, token=token))
    instance = started["startInstance"]["instance"]
    return instance["id"], {r["rowKey"]: r["childId"] for r in instance["subworkflows"]}


def test_a_cancelled_booking_waits_for_its_holds_to_release(client: TestClient) -> None:
    booking_id, holds = booking(client)
    with socket(client) as ws:
        ws.subscribe("subscription($p: ID!) { childCompleted(parentId: $p) { kind row { "
                     "rowKey status outcome cancelling } } }", {"p": booking_id})
        ws.wait_registered(1)
        cancelled = data(gql(client, CANCEL, {"i": booking_id, "r": "called off"}))
        view = cancelled["cancelInstance"]["instance"]
        assert view["status"] == "CANCELLING" and cancelled["cancelInstance"]["changed"]
        assert {(r["rowKey"], r["status"], r["cancelling"]) for r in view["subworkflows"]} == {
            (seat, "ACTIVE", True) for seat in SEATS}
        for child in holds.values():
            hold = data(gql(client, INSTANCE, {"i": child}))["instance"]
            assert (hold["status"], hold["currentStage"]) == ("CANCELLING", "releasing")
            assert hold["cancelReason"] is not None and hold["cancelledAt"] is None
            [effect] = hold["pendingEffects"]
            assert effect["name"] == "release-seat"
            data(gql(client, """mutation($i: ID!, $k: String!) { completeEffect(instanceId: $i,
                effectKey: $k, status: DONE) { changed } }""", {"i": child, "k": effect["key"]}))
        events = [ws.next()["data"]["childCompleted"] for _ in SEATS]
    assert sorted((e["kind"], e["row"]["rowKey"], e["row"]["status"], e["row"]["outcome"])
                  for e in events) == [("cancelled", seat, "CANCELLED", "cancelled")
                                       for seat in SEATS]
    final = data(gql(client, INSTANCE, {"i": booking_id}))["instance"]
    assert final["status"] == "CANCELLED" and final["cancelledAt"] is not None
    assert final["cancelReason"] == "called off"
    counts = data(gql(client, """query($p: ID!) { cohort(parentId: $p, activity: "holds") {
        total active cancelled settled } }""", {"p": booking_id}))["cohort"]
    assert counts == {"total": 2, "active": 0, "cancelled": 2, "settled": True}
    listed = data(gql(client, """{ instances(where: {status: CANCELLED}) { totalCount } }"""))
    assert listed["instances"]["totalCount"] == 3
    again = gql(client, CANCEL, {"i": booking_id})
    assert error_code(again) == "action-disabled"
    assert again["errors"][0]["extensions"]["details"]["reason"] == "instance-cancelled"


def test_cancel_instance_needs_the_operator_role(secured: TestClient) -> None:
    booking_id, _ = booking(secured, token="admin-token-for-tests")
    refused = gql(secured, CANCEL, {"i": booking_id}, token="view-token-for-tests")
    assert error_code(refused) == "forbidden"
    allowed = gql(secured, CANCEL, {"i": booking_id}, token="op-token-for-tests")
    assert data(allowed)["cancelInstance"]["instance"]["status"] == "CANCELLING"


def test_instance_changed_follows_cancelling_until_cancelled(client: TestClient) -> None:
    """CANCELLING is not an end: the subscription goes on until CANCELLED, then completes."""
    booking_id, holds = booking(client)
    with socket(client) as ws:
        op = ws.subscribe("subscription($i: ID!) { instanceChanged(id: $i) { kind "
                          "instance { status } } }", {"i": booking_id})  # fmt: skip
        assert ws.next()["data"]["instanceChanged"]["kind"] == "snapshot"
        data(gql(client, CANCEL, {"i": booking_id}))
        seen = [ws.next()["data"]["instanceChanged"]]
        for child in holds.values():
            [effect] = data(gql(client, INSTANCE, {"i": child}))["instance"]["pendingEffects"]
            data(gql(client, """mutation($i: ID!, $k: String!) { completeEffect(instanceId: $i,
                effectKey: $k, status: DONE) { changed } }""", {"i": child, "k": effect["key"]}))
        while seen[-1]["instance"]["status"] != "CANCELLED":
            seen.append(ws.next()["data"]["instanceChanged"])
        assert ws.receive() == {"id": op, "type": "complete"}  # the terminal event is the last
    assert seen[0] == {"kind": "cancelling", "instance": {"status": "CANCELLING"}}
    assert seen[-1] == {"kind": "cancelled", "instance": {"status": "CANCELLED"}}
