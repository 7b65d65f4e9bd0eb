"""``fireCohort`` and ``abortCohort`` through GraphQL: the operator role, BulkResult with a
per-child refusal, a replay, closing (``Cohort.closed``, ``cohort-closed``) and the
refusals' codes."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import data, error_code, gql
from tests.engine.bulk_defs import cohort_parent, nudgeable, records

pytestmark = pytest.mark.lake

OP = "op-token-for-tests"
FIRE = """mutation($p: ID!, $a: String!, $w: CohortFilter, $k: String, $x: String!) {
  fireCohort(parentId: $p, activity: $a, where: $w, childActivity: "task", action: $x,
             idempotencyKey: $k) {
    matched applied skipped refusals { childId rowKey code message } } }"""
ABORT = """mutation($p: ID!, $a: String!, $w: CohortFilter, $r: String) {
  abortCohort(parentId: $p, activity: $a, where: $w, reason: $r) {
    matched applied skipped refusals { rowKey code } } }"""
COHORT = """query($p: ID!) { cohort(parentId: $p, activity: "translate") {
  total aborted queued closed rows { rowKey childId status outcome } } }"""
TOP_UP = """mutation($i: ID!) { fireAction(instanceId: $i, activity: "translate",
  action: "top-up") { changed } }"""


def cohort(client: TestClient, *names: str, max_active: int | None = None) -> str:
    data(gql(client, "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }",
             {"d": [cohort_parent(max_active=max_active), nudgeable()]},
             token="admin-token-for-tests"))  # fmt: skip
    started = data(gql(client, """mutation($f: JSON) { startInstance(definition: "p",
        fields: $f) { instance { id } } }""", {"f": records(*names)}, token=OP))
    parent_id: str = started["startInstance"]["instance"]["id"]
    data(gql(client, """mutation($i: ID!) { fireAction(instanceId: $i, activity: "go",
        action: "go") { changed } }""", {"i": parent_id}, token=OP))  # fmt: skip
    return parent_id


def rows(client: TestClient, parent_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    found = data(gql(client, COHORT, {"p": parent_id}, token=OP))["cohort"]
    return found, {r["rowKey"]: r for r in found["rows"]}


def test_fire_cohort_needs_an_operator_and_lists_a_refusing_child(
        secured: TestClient) -> None:
    parent_id = cohort(secured, "a1", "locked", "d1", "a2")
    variables = {"p": parent_id, "a": "translate", "k": "api-fire", "x": "nudge",
                 "w": {"status": ["ACTIVE"]}}
    assert error_code(gql(secured, FIRE, variables, token="view-token-for-tests")) \
        == "forbidden"
    assert error_code(gql(secured, FIRE, variables)) == "unauthenticated"

    result = data(gql(secured, FIRE, variables, token=OP))["fireCohort"]
    _, seen = rows(secured, parent_id)
    assert (result["matched"], result["applied"], result["skipped"]) == (3, 2, 0)
    assert result["refusals"] == [{
        "childId": seen["locked"]["childId"], "rowKey": "locked", "code": "action-disabled",
        "message": "task.nudge is disabled: filter-failed"}]
    replay = data(gql(secured, FIRE, variables, token=OP))["fireCohort"]
    assert (replay["applied"], replay["skipped"], len(replay["refusals"])) == (0, 2, 1)

    bad = gql(secured, FIRE, {**variables, "k": None, "w": {"where": "outputs.("}}, token=OP)
    assert error_code(bad) == "groq-syntax"
    missing = gql(secured, FIRE, {**variables, "a": "go", "k": None}, token=OP)
    assert error_code(missing) == "cohort-not-found"
    reused = gql(secured, FIRE, {**variables, "x": "finish"}, token=OP)
    assert error_code(reused) == "contract-violation"


def test_abort_cohort_without_a_filter_closes_it(secured: TestClient) -> None:
    parent_id = cohort(secured, "a0", "a1", "a2", max_active=1)
    found, _ = rows(secured, parent_id)
    assert (found["queued"], found["closed"]) == (2, False)

    partial = data(gql(secured, ABORT, {"p": parent_id, "a": "translate",
                                        "w": {"rowKeys": ["a2"]}}, token=OP))["abortCohort"]
    assert (partial["matched"], partial["applied"]) == (1, 1)
    assert rows(secured, parent_id)[0]["closed"] is False

    result = data(gql(secured, ABORT, {"p": parent_id, "a": "translate", "r": "enough"},
                      token=OP))["abortCohort"]
    assert result == {"matched": 3, "applied": 2, "skipped": 1, "refusals": []}
    found, seen = rows(secured, parent_id)
    assert (found["total"], found["aborted"], found["queued"], found["closed"]) == \
        (3, 3, 0, True)
    assert {r["status"] for r in seen.values()} == {"ABORTED"}
    refused = gql(secured, TOP_UP, {"i": parent_id}, token=OP)
    assert error_code(refused) == "cohort-closed"
    assert refused["errors"][0]["extensions"]["details"]["closedBy"] == "abortCohort"
    assert rows(secured, parent_id)[0]["total"] == 3


def test_cancel_cohort_without_a_filter_closes_it(secured: TestClient) -> None:
    parent_id = cohort(secured, "a0", "a1", "a2", max_active=2)
    cancel = """mutation($p: ID!) { cancelCohort(parentId: $p, activity: "translate",
      reason: "not needed", idempotencyKey: "api-cancel") { matched applied skipped } }"""
    assert error_code(gql(secured, cancel, {"p": parent_id},
                          token="view-token-for-tests")) == "forbidden"
    result = data(gql(secured, cancel, {"p": parent_id}, token=OP))["cancelCohort"]
    assert result == {"matched": 3, "applied": 3, "skipped": 0}
    found, seen = rows(secured, parent_id)
    assert found["closed"] is True and found["queued"] == 0
    assert {(r["status"], r["outcome"]) for r in seen.values()} == {("CANCELLED", "cancelled")}
    assert error_code(gql(secured, TOP_UP, {"i": parent_id}, token=OP)) == "cohort-closed"
    replay = data(gql(secured, cancel, {"p": parent_id}, token=OP))["cancelCohort"]
    assert replay == {"matched": 3, "applied": 0, "skipped": 3}
