"""The failure budget through the API: ``Cohort.budget``, ``updateCohort(failureBudget)``,
rows' ``abortReason``, and the refusals."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import data, error_code, gql
from tests.api.test_window import start_cohort
from tests.engine.cohort_defs import items
from tests.engine.outcome_defs import worker
from tests.engine.test_budget import budgeted

pytestmark = pytest.mark.lake

COHORT = """query($p: ID!) { cohort(parentId: $p, activity: "translate") {
  total failed queued aborted budget { count percent used exceeded }
  rows { rowKey childId status outcome abortReason } } }"""
UPDATE = """mutation($p: ID!, $b: JSON) { updateCohort(parentId: $p, activity: "translate",
  failureBudget: $b) { failed budget { count percent used exceeded } } }"""
FAIL = """mutation($i: ID!) { fireAction(instanceId: $i, activity: "task",
  action: "give-up") { changed } }"""
STATE = """query($i: ID!) { instance(id: $i) { currentStage
  history { type } } }"""


def budgeted_cohort(client: TestClient, budget: dict[str, Any] | None,
                    token: str | None = None, admin: str | None = None) -> str:
    return start_cohort(client, [budgeted(budget, max_active=2), worker()], token, admin)


def cohort(client: TestClient, parent_id: str) -> dict[str, Any]:
    found: dict[str, Any] = data(gql(client, COHORT, {"p": parent_id}))["cohort"]
    return found


def test_the_budget_is_visible_and_acts_through_the_api(client: TestClient) -> None:
    parent_id = budgeted_cohort(client, {"count": 1})
    before = cohort(client, parent_id)
    assert before["budget"] == {"count": 1, "percent": None, "used": 0, "exceeded": False}
    ids = {r["rowKey"]: r["childId"] for r in before["rows"]}
    data(gql(client, FAIL, {"i": ids["a"]}))
    assert cohort(client, parent_id)["budget"]["used"] == 1
    data(gql(client, FAIL, {"i": ids["b"]}))
    after = cohort(client, parent_id)
    assert after["budget"]["exceeded"] is True
    rows = {r["rowKey"]: r for r in after["rows"]}
    assert [rows[k]["status"] for k in "cde"] == ["ABORTED"] * 3
    assert {rows[k]["abortReason"] for k in "cde"} == {"failure-budget-exceeded"}
    assert rows["a"]["outcome"] == "failed" and rows["a"]["abortReason"] is None
    state = data(gql(client, STATE, {"i": parent_id}))["instance"]
    assert state["currentStage"] == "failed"
    assert [h["type"] for h in state["history"]].count("cohortFailed") == 1


def test_no_budget_reads_null_and_update_cohort_sets_one(client: TestClient) -> None:
    parent_id = budgeted_cohort(client, None)
    assert cohort(client, parent_id)["budget"] is None
    ids = {r["rowKey"]: r["childId"] for r in cohort(client, parent_id)["rows"]}
    data(gql(client, FAIL, {"i": ids["a"]}))
    set_ = data(gql(client, UPDATE, {"p": parent_id, "b": {"percent": 50}}))["updateCohort"]
    assert set_["budget"] == {"count": None, "percent": 50.0, "used": 1, "exceeded": False}
    lowered = data(gql(client, UPDATE, {"p": parent_id, "b": {"count": 0}}))["updateCohort"]
    assert lowered["budget"]["exceeded"] is True and lowered["budget"]["count"] == 0
    assert data(gql(client, STATE, {"i": parent_id}))["instance"]["currentStage"] == "failed"
    for bad in ({"count": 1, "percent": 2}, {"percent": 0}, {"count": -1}, {"count": 2**31},
                "ten", [1]):
        refused = gql(client, UPDATE, {"p": parent_id, "b": bad})
        assert error_code(refused) == "invalid-input", bad
        assert refused["errors"][0]["extensions"]["details"]["field"] == "failureBudget"


def test_update_cohort_budget_needs_the_operator_role(secured: TestClient) -> None:
    parent_id = budgeted_cohort(secured, {"count": 3}, token="op-token-for-tests",
                                admin="admin-token-for-tests")
    refused = gql(secured, UPDATE, {"p": parent_id, "b": {"count": 1}},
                  token="view-token-for-tests")
    assert error_code(refused) == "forbidden"
    allowed = gql(secured, UPDATE, {"p": parent_id, "b": {"count": 1}},
                  token="op-token-for-tests")
    assert data(allowed)["updateCohort"]["budget"]["count"] == 1


def test_deploy_takes_cancel_rest_and_refuses_an_unknown_policy(client: TestClient) -> None:
    deploy = ("mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) "
              "{ definitions { name } } }")
    taken = gql(client, deploy, {"d": [budgeted({"count": 1}, policy="cancel-rest"),
                                       worker()]})
    assert "errors" not in taken, taken
    refused = gql(client, deploy, {"d": [budgeted({"count": 1}, policy="cancel-all"),
                                         worker()]})
    assert error_code(refused) == "definition-invalid"
    assert "onBudgetExceeded" in str(refused["errors"][0]["extensions"]["details"])


SIX = """query($p: ID!) { cohort(parentId: $p, activity: "translate") {
  total done failed aborted queued active budget { count used exceeded stopped }
  rows { rowKey status outcome abortReason } } }"""


def test_rows_the_budget_stopped_count_as_aborted_not_as_failures(client: TestClient) -> None:
    """Two give-ups cross a budget of one in a six-row cohort (window of three): the two
    live siblings the budget aborted and the two queued rows it skipped are its effect."""
    data(gql(client, "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }",
             {"d": [budgeted({"count": 1}, max_active=3), worker()]}))
    started = data(gql(client, """mutation($f: JSON) { startInstance(definition: "p",
        fields: $f) { instance { id } } }""", {"f": items(*"abcdef")}))
    parent_id = started["startInstance"]["instance"]["id"]
    data(gql(client, """mutation($i: ID!) { fireAction(instanceId: $i, activity: "go",
        action: "go") { changed } }""", {"i": parent_id}))
    ids = {r["rowKey"]: r["childId"] for r in cohort(client, parent_id)["rows"]}
    data(gql(client, FAIL, {"i": ids["a"]}))
    data(gql(client, FAIL, {"i": ids["b"]}))
    found = data(gql(client, SIX, {"p": parent_id}))["cohort"]
    rows = {r["rowKey"]: r for r in found["rows"]}
    assert {k for k, r in rows.items() if r["abortReason"] == "failure-budget-exceeded"
            and r["status"] == "ABORTED"} == set("cdef")
    assert [rows[k]["outcome"] for k in "ab"] == ["failed", "failed"]
    assert {k: found[k] for k in ("total", "done", "failed", "aborted", "queued", "active")
            } == {"total": 6, "done": 2, "failed": 2, "aborted": 4, "queued": 0, "active": 0}
    assert found["budget"] == {"count": 1, "used": 2, "exceeded": True, "stopped": 4}
