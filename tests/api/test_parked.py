"""``parkedInstances``: what the heartbeat parked, why and until when; a tick un-parks."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from kinflow.worker import Worker
from tests.api.conftest import data, error_code, gql
from tests.cli.test_parked import LOOPS

pytestmark = pytest.mark.lake
PARKED = """query($ids: [ID!]) { parkedInstances(ids: $ids) {
  instanceId kind code message details parkedAt until failures } }"""


def _parked(client: TestClient, ids: list[str] | None = None) -> list[dict[str, Any]]:
    return list(data(gql(client, PARKED, {"ids": ids}))["parkedInstances"])


def test_parked_instances_lists_what_the_heartbeat_parked(client: TestClient) -> None:
    data(gql(client, "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) "
                     "{ definitions { name } } }", {"d": [LOOPS]}))
    iid = data(gql(client, 'mutation { startInstance(definition: "loops") '
                           '{ instance { id } } }'))["startInstance"]["instance"]["id"]
    body = gql(client, 'mutation($i: ID!) { fireAction(instanceId: $i, activity: "go", '
                       'action: "go") { changed } }', {"i": iid})
    assert error_code(body) == "cascade-limit"
    assert _parked(client) == []
    engine = client.app.state.engine  # type: ignore[attr-defined]
    report = client.portal.call(Worker(engine, grace_seconds=0).run_pass)  # type: ignore[union-attr]
    assert report.parked == [("tick", iid, "cascade-limit")]
    [parked] = _parked(client)
    assert (parked["instanceId"], parked["kind"], parked["code"], parked["failures"]) == (
        iid, "tick", "cascade-limit", 1)
    assert parked["until"] > parked["parkedAt"] and parked["details"]["instanceId"] == iid
    assert _parked(client, ["instance.other"]) == []
    assert error_code(gql(client, "mutation($i: ID!) { tick(instanceId: $i) { changed } }",
                          {"i": iid})) == "cascade-limit"
    assert _parked(client, [iid]) == []  # the tick un-parked it
    assert error_code(gql(client, "{ parkedInstances(first: 0) { code } }")) == "invalid-input"
