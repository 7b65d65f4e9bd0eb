"""Child ids cannot be taken: a queued row's child id and a row's later attempt ids are
refused to ``startInstance`` and ``putDocument``; a document planted at one behind the
API's back parks the parent with ``child-id-taken`` instead of failing its rounds for
ever, and the parent goes on once the document is gone."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from starlette.testclient import TestClient

from kinflow.core.errors import InstanceIdReserved
from kinflow.engine import Engine
from kinflow.worker import PassReport, Worker
from tests.api.conftest import data, error_code, gql
from tests.api.test_redrive import OP, REDRIVE, ROWS, cohort, fire
from tests.api.test_window import COHORT, windowed_cohort

pytestmark = pytest.mark.lake

START = """mutation($i: ID!) { startInstance(definition: "c", instanceId: $i,
  fields: {item: "squat"}) { instance { id } } }"""
PUT = """mutation($d: JSON!) { putDocument(document: $d) }"""
PARKED = """{ parkedInstances { instanceId kind code details } }"""
FINISH = """mutation($i: ID!) { fireAction(instanceId: $i, activity: "task",
  action: "finish") { changed } }"""


def rows(client: TestClient, parent_id: str) -> list[dict[str, Any]]:
    return list(data(gql(client, COHORT, {"p": parent_id}))["cohort"]["rows"])


def engine_of(client: TestClient) -> Engine:
    engine: Engine = client.app.state.engine  # type: ignore[attr-defined]
    return engine


def heartbeat(client: TestClient) -> PassReport:
    report: PassReport = client.portal.call(  # type: ignore[union-attr]
        Worker(engine_of(client), grace_seconds=0).run_pass)
    return report


def plant(client: TestClient, doc_id: str) -> None:
    """Write a document straight into the lake, as a direct database client could."""
    engine = engine_of(client)
    client.portal.call(functools.partial(  # type: ignore[union-attr]
        engine.lake.create, {"_id": doc_id, "_type": "article"}, dataset=engine.dataset))


def remove(client: TestClient, doc_id: str) -> None:
    engine = engine_of(client)
    client.portal.call(functools.partial(  # type: ignore[union-attr]
        engine.lake.delete, doc_id, dataset=engine.dataset))


def test_a_queued_rows_child_id_is_refused_and_the_window_starts_it(
        client: TestClient) -> None:
    parent_id = windowed_cohort(client)
    before = rows(client, parent_id)
    queued = [r["childId"] for r in before if r["status"] == "QUEUED"]
    active = [r["childId"] for r in before if r["status"] == "ACTIVE"]
    assert len(queued) == 3 and len(active) == 2

    for squat in (queued[0], f"{queued[1]}-a2", f"{active[0]}-a3", f"{queued[2]}-2"):
        refused = gql(client, START, {"i": squat})
        assert error_code(refused) == "instance-id-reserved", squat
        assert refused["errors"][0]["extensions"]["details"] == {
            "id": squat, "prefix": "instance.c"}
        assert error_code(gql(client, PUT, {"d": {"_id": squat, "_type": "article"}})) \
            == "reserved-id"
    with pytest.raises(InstanceIdReserved):  # the engine's own verb (the CLI's path)
        client.portal.call(functools.partial(  # type: ignore[union-attr]
            engine_of(client).start_instance, "c", instance_id=queued[0]))
    # ids of other shapes stay the caller's to choose
    mine = data(gql(client, START, {"i": "instance.cat-7"}))
    assert mine["startInstance"]["instance"]["id"] == "instance.cat-7"

    for child in active:
        data(gql(client, FINISH, {"i": child}))
    after = {r["childId"]: r["status"] for r in rows(client, parent_id)}
    assert [after[c] for c in queued[:2]] == ["ACTIVE", "ACTIVE"]
    started = data(gql(client, """query($i: ID!) { instance(id: $i) {
        definition parent { id } } }""", {"i": queued[0]}))["instance"]
    assert started == {"definition": "c", "parent": {"id": parent_id}}


def test_a_later_attempts_id_is_refused_and_the_redrive_proceeds(
        secured: TestClient) -> None:
    parent_id, children = cohort(secured)
    fire(secured, children["a"], "finish", {"words": 5})
    fire(secured, children["b"], "give-up")
    squat = f"{children['b']}-a2"
    refused = gql(secured, START, {"i": squat}, token=OP)
    assert error_code(refused) == "instance-id-reserved"

    result = data(gql(secured, REDRIVE, {"p": parent_id, "a": "translate",
                                         "w": {"status": ["DONE"]}}, token=OP))
    assert result["redriveCohort"] == {"matched": 2, "applied": 1, "skipped": 1,
                                       "refusals": []}
    row = {r["rowKey"]: r for r in data(gql(secured, ROWS, {"i": parent_id}, token=OP))
           ["instance"]["subworkflows"]}["b"]
    assert (row["childId"], row["status"], row["attempt"]) == (squat, "ACTIVE", 2)


def test_a_document_planted_at_a_queued_child_id_parks_the_parent(
        client: TestClient) -> None:
    parent_id = windowed_cohort(client)
    before = rows(client, parent_id)
    queued = [r["childId"] for r in before if r["status"] == "QUEUED"]
    active = [r["childId"] for r in before if r["status"] == "ACTIVE"]
    plant(client, queued[0])

    # the child's own verb commits; starting the queued row is the parent's refusal
    finished = gql(client, FINISH, {"i": active[0]})
    assert error_code(finished) == "child-id-taken"
    assert finished["errors"][0]["extensions"]["details"]["childId"] == queued[0]
    child = data(gql(client, """query($i: ID!) { instance(id: $i) { currentStage } }""",
                     {"i": active[0]}))["instance"]
    assert child == {"currentStage": "done"}

    first = heartbeat(client)
    assert first.parked == [("propagate", parent_id, "child-id-taken")]
    [parked] = data(gql(client, PARKED))["parkedInstances"]
    assert (parked["instanceId"], parked["code"]) == (parent_id, "child-id-taken")
    assert (parked["details"]["instanceId"], parked["details"]["childId"]) == (
        parent_id, queued[0])
    again = heartbeat(client)  # backing off: the parent is not retried on every pass
    assert again.failed == [] and parent_id not in {item for _, item in again.processed}
    assert [r["status"] for r in rows(client, parent_id)].count("QUEUED") == 3

    # once the document is gone, a tick un-parks the parent and its window fills again
    remove(client, queued[0])
    data(gql(client, "mutation($i: ID!) { tick(instanceId: $i) { changed } }",
             {"i": parent_id}))
    after = {r["childId"]: r["status"] for r in rows(client, parent_id)}
    assert after[queued[0]] == "ACTIVE" and list(after.values()).count("QUEUED") == 2
    assert data(gql(client, PARKED))["parkedInstances"] == []


def test_a_document_planted_at_an_attempt_id_refuses_only_that_rows_redrive(
        secured: TestClient) -> None:
    parent_id, children = cohort(secured)
    fire(secured, children["a"], "finish", {"words": 5})
    fire(secured, children["b"], "give-up")
    fire(secured, children["c"], "give-up")
    squat = f"{children['b']}-a2"
    plant(secured, squat)
    variables = {"p": parent_id, "a": "translate", "w": {"status": ["DONE"]}}
    result = data(gql(secured, REDRIVE, variables, token=OP))["redriveCohort"]
    [refusal] = result.pop("refusals")
    assert result == {"matched": 3, "applied": 1, "skipped": 1}
    assert (refusal["rowKey"], refusal["childId"], refusal["code"]) == (
        "b", children["b"], "child-id-taken")
    assert squat in refusal["message"]
    statuses = {r["rowKey"]: (r["status"], r["childId"]) for r in data(gql(
        secured, ROWS, {"i": parent_id}, token=OP))["instance"]["subworkflows"]}
    assert statuses["c"] == ("ACTIVE", f"{children['c']}-a2")
    assert statuses["b"] == ("DONE", children["b"])
    assert heartbeat(secured).failed == []  # nothing left owed that fails

    remove(secured, squat)
    again = data(gql(secured, REDRIVE, variables, token=OP))["redriveCohort"]
    assert (again["applied"], again["refusals"]) == (1, [])
    row = {r["rowKey"]: r for r in data(gql(secured, ROWS, {"i": parent_id}, token=OP))
           ["instance"]["subworkflows"]}["b"]
    assert (row["status"], row["childId"], row["attempt"]) == ("ACTIVE", squat, 2)
