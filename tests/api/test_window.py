"""The cohort window through the API: ``Cohort.queued/maxActive``, ``QUEUED`` rows and
``updateCohort`` (operator role, ``cohort-not-found``)."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import data, error_code, gql
from tests.api.test_subscriptions import socket
from tests.engine.cohort_defs import child, items, windowed

pytestmark = pytest.mark.lake

COHORT = """query($p: ID!) { cohort(parentId: $p, activity: "translate") {
  total active queued done maxActive settled rows { rowKey status childId } } }"""
UPDATE = """mutation($p: ID!, $a: String!, $m: Int) {
  updateCohort(parentId: $p, activity: $a, maxActive: $m) {
    total active queued maxActive rows { rowKey status } } }"""


def windowed_cohort(client: TestClient, token: str | None = None,
                    admin: str | None = None) -> str:
    return start_cohort(client, [windowed(2), child()], token, admin)


def start_cohort(client: TestClient, definitions: list[dict[str, Any]],
                 token: str | None = None, admin: str | None = None) -> str:
    """Deploy ``definitions`` (parent ``p``), start it over five items and spawn."""
    data(gql(client, "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }",
             {"d": definitions}, token=admin))  # fmt: skip
    started = data(gql(client, """mutation($f: JSON) { startInstance(definition: "p",
        fields: $f) { instance { id } } }""", {"f": items("a", "b", "c", "d", "e")},
        token=token))  # fmt: skip
    parent_id: str = started["startInstance"]["instance"]["id"]
    data(gql(client, """mutation($i: ID!) { fireAction(instanceId: $i, activity: "go",
        action: "go") { changed } }""", {"i": parent_id}, token=token))  # fmt: skip
    return parent_id


def test_a_windowed_cohort_reports_queued_rows_and_update_cohort_raises_it(
        client: TestClient) -> None:
    parent_id = windowed_cohort(client)
    cohort = data(gql(client, COHORT, {"p": parent_id}))["cohort"]
    assert (cohort["total"], cohort["active"], cohort["queued"], cohort["maxActive"],
            cohort["settled"]) == (5, 2, 3, 2, False)
    assert [r["status"] for r in cohort["rows"]] == ["ACTIVE"] * 2 + ["QUEUED"] * 3
    raised = data(gql(client, UPDATE, {"p": parent_id, "a": "translate", "m": 4}))
    assert raised["updateCohort"] == {
        "total": 5, "active": 4, "queued": 1, "maxActive": 4,
        "rows": [{"rowKey": k, "status": s} for k, s in zip(
            "abcde", ["ACTIVE"] * 4 + ["QUEUED"], strict=True)]}
    assert data(gql(client, COHORT, {"p": parent_id}))["cohort"]["maxActive"] == 4


def test_update_cohort_refuses_an_unknown_cohort_and_a_window_below_one(
        client: TestClient) -> None:
    parent_id = windowed_cohort(client)
    never = gql(client, UPDATE, {"p": parent_id, "a": "edit", "m": 3})
    assert error_code(never) == "cohort-not-found"
    assert never["errors"][0]["extensions"]["details"] == {"parentId": parent_id,
                                                            "activity": "edit"}
    assert error_code(gql(client, UPDATE, {"p": parent_id, "a": "translate", "m": 0})) \
        == "invalid-input"
    assert data(gql(client, COHORT, {"p": parent_id}))["cohort"]["active"] == 2


def test_update_cohort_needs_the_operator_role(secured: TestClient) -> None:
    parent_id = windowed_cohort(secured, token="op-token-for-tests",
                                admin="admin-token-for-tests")
    refused = gql(secured, UPDATE, {"p": parent_id, "a": "translate", "m": 3},
                  token="view-token-for-tests")
    assert error_code(refused) == "forbidden"
    allowed = gql(secured, UPDATE, {"p": parent_id, "a": "translate", "m": 3},
                  token="op-token-for-tests")
    assert data(allowed)["updateCohort"]["active"] == 3


def test_child_completed_is_silent_about_queued_rows(client: TestClient) -> None:
    parent_id = windowed_cohort(client)
    rows = data(gql(client, COHORT, {"p": parent_id}))["cohort"]["rows"]
    with socket(client) as ws:
        ws.subscribe("""subscription($p: ID!) { childCompleted(parentId: $p) {
            kind row { rowKey status } } }""", {"p": parent_id})
        ws.wait_registered(1)
        data(gql(client, """mutation($i: ID!) { fireAction(instanceId: $i, activity: "task",
            action: "finish") { changed } }""", {"i": rows[0]["childId"]}))  # fmt: skip
        event = ws.next()["data"]["childCompleted"]
    # queued rows are live: no snapshot or completion for them comes first
    assert event == {"kind": "completed", "row": {"rowKey": "a", "status": "DONE"}}
