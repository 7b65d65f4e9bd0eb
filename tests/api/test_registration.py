"""``Cohort.registering`` through the API (docs/subworkflows.md#registration-and-limits)."""

from __future__ import annotations

import dataclasses

import pytest
from starlette.testclient import TestClient

from kinflow.engine import Engine
from tests.api.conftest import data, gql
from tests.engine.cohort_defs import child
from tests.engine.test_registration import lake_parent

pytestmark = pytest.mark.lake

COHORT = """query($p: ID!) { cohort(parentId: $p, activity: "translate") {
  total queued active registering settled } }"""


def test_a_cohort_reads_registering_until_its_last_batch(client: TestClient) -> None:
    engine: Engine = client.app.state.engine  # type: ignore[attr-defined]
    engine.transact.limits = dataclasses.replace(engine.transact.limits, registration_batch=4)
    engine.faults.arm("mid-registration")  # the rest waits for the heartbeat
    deploy = "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }"
    data(gql(client, deploy, {"d": [lake_parent(2), child()]}))
    for n in range(10):
        data(gql(client, "mutation($d: JSON!) { putDocument(document: $d) }",
                 {"d": {"_id": f"item-{n:02d}", "_type": "item"}}))
    started = data(gql(client, 'mutation { startInstance(definition: "p") { instance { id } } }'))
    parent_id = started["startInstance"]["instance"]["id"]
    data(gql(client, """mutation($i: ID!) { fireAction(instanceId: $i, activity: "go",
        action: "go") { changed } }""", {"i": parent_id}))
    cohort = data(gql(client, COHORT, {"p": parent_id}))["cohort"]
    assert cohort == {"total": 4, "queued": 2, "active": 2, "registering": True,
                      "settled": False}
    portal = client.portal
    assert portal is not None
    portal.call(engine.registrar.idle)
    portal.call(engine.maintenance.finish_registration, parent_id)
    cohort = data(gql(client, COHORT, {"p": parent_id}))["cohort"]
    assert (cohort["total"], cohort["registering"]) == (10, False)
