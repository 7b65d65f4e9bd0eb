"""A small cohort driven through the API: a parent spawning one child per ``obs-item``.

Shared by the metrics and trace tests: deploy, put N items, start the parent
(its spawn creates the N children in its commit), then fire each child's only
action over GraphQL; the parent then leaves its fan-out stage.
"""

from __future__ import annotations

from typing import Any

from pymongo import MongoClient
from starlette.testclient import TestClient

from tests.api.conftest import data, gql
from tests.one_action_cohort import fan_out_parent, one_action_child

CHILD = one_action_child("obs", "Observed")
PARENT = fan_out_parent("obs", "Observed")
DEPLOY = "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }"
PUT = "mutation($d: JSON!) { putDocument(document: $d) }"
START = 'mutation { startInstance(definition: "obs-parent") { instance { id currentStage } } }'
FIRE = ('mutation($id: ID!) { fireAction(instanceId: $id, activity: "task", '
        'action: "finish") { instance { status } } }')
STAGE = "query($id: ID!) { instance(id: $id) { currentStage } }"


def spawn(client: TestClient, lake_uri: str, database: str, size: int,
          token: str | None = None) -> tuple[str, list[str]]:
    """Deploy, put ``size`` items and start the parent: its id and its children's."""
    data(gql(client, DEPLOY, {"d": [CHILD, PARENT]}, token))
    for number in range(size):
        data(gql(client, PUT, {"d": {"_id": f"item-{number}", "_type": "obs-item"}}, token))
    parent = data(gql(client, START, token=token))["startInstance"]["instance"]["id"]
    raw: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    try:
        children = sorted(doc["_id"] for doc in raw[database]["production"].find(
            {"parentInstance": parent}, {"_id": 1}))
    finally:
        raw.close()
    assert len(children) == size
    return parent, children


def fire(client: TestClient, child: str, token: str | None = None) -> None:
    data(gql(client, FIRE, {"id": child}, token))


def stage(client: TestClient, parent: str, token: str | None = None) -> str:
    found: str = data(gql(client, STAGE, {"id": parent}, token))["instance"]["currentStage"]
    return found
