"""``redriveCohort`` through GraphQL: the operator role, the filter input, BulkResult,
the rows' new attempts and the refusals' codes."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import data, error_code, gql
from tests.engine.cohort_defs import items, parent
from tests.engine.outcome_defs import worker

pytestmark = pytest.mark.lake

OP = "op-token-for-tests"
ALL_SUCCEEDED = ("count($subworkflows[activity == 'translate' && current"
                 " && outcome != 'succeeded']) == 0")
REDRIVE = """mutation($p: ID!, $a: String!, $w: CohortFilter, $k: String) {
  redriveCohort(parentId: $p, activity: $a, where: $w, idempotencyKey: $k) {
    matched applied skipped refusals { childId rowKey code message } } }"""
ROWS = """query($i: ID!) { instance(id: $i) { currentStage subworkflows {
  rowKey childId status outcome attempt previousChildIds } } }"""


def cohort(client: TestClient) -> tuple[str, dict[str, str]]:
    data(gql(client, "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }",
             {"d": [parent(settled=ALL_SUCCEEDED), worker()]},
             token="admin-token-for-tests"))  # fmt: skip
    started = data(gql(client, """mutation($f: JSON) { startInstance(definition: "p",
        fields: $f) { instance { id } } }""", {"f": items("a", "b", "c")}, token=OP))
    parent_id: str = started["startInstance"]["instance"]["id"]
    data(gql(client, """mutation($i: ID!) { fireAction(instanceId: $i, activity: "go",
        action: "go") { changed } }""", {"i": parent_id}, token=OP))  # fmt: skip
    rows = data(gql(client, ROWS, {"i": parent_id}, token=OP))["instance"]["subworkflows"]
    return parent_id, {r["rowKey"]: r["childId"] for r in rows}


def fire(client: TestClient, child: str, action: str, params: dict[str, int] | None = None
         ) -> None:
    data(gql(client, """mutation($i: ID!, $x: String!, $p: JSON) { fireAction(instanceId: $i,
        activity: "task", action: $x, params: $p) { changed } }""",
             {"i": child, "x": action, "p": params}, token=OP))  # fmt: skip


def test_redrive_through_graphql_needs_an_operator_and_redrives_only_the_failed(
        secured: TestClient) -> None:
    parent_id, children = cohort(secured)
    fire(secured, children["a"], "finish", {"words": 5})
    fire(secured, children["b"], "give-up")
    fire(secured, children["c"], "give-up")
    variables = {"p": parent_id, "a": "translate", "k": "api-1",
                 "w": {"status": ["DONE"], "where": "outputs.item != 'c'"}}

    assert error_code(gql(secured, REDRIVE, variables, token="view-token-for-tests")) \
        == "forbidden"
    assert error_code(gql(secured, REDRIVE, variables)) == "unauthenticated"
    result = data(gql(secured, REDRIVE, variables, token=OP))["redriveCohort"]
    assert result == {"matched": 2, "applied": 1, "skipped": 1, "refusals": []}
    replay = data(gql(secured, REDRIVE, variables, token=OP))["redriveCohort"]
    assert replay == {"matched": 2, "applied": 0, "skipped": 2, "refusals": []}

    rows = {r["rowKey"]: r for r in data(gql(secured, ROWS, {"i": parent_id}, token=OP))
            ["instance"]["subworkflows"]}
    assert (rows["b"]["status"], rows["b"]["attempt"], rows["b"]["previousChildIds"]) == \
        ("ACTIVE", 2, [children["b"]])
    assert rows["b"]["childId"] != children["b"]
    assert (rows["c"]["attempt"], rows["c"]["outcome"]) == (1, "failed")
    assert rows["a"]["childId"] == children["a"]

    bad = gql(secured, REDRIVE, {**variables, "k": None, "w": {"where": "outputs.("}}, token=OP)
    assert error_code(bad) == "groq-syntax"
    missing = gql(secured, REDRIVE, {"p": parent_id, "a": "go"}, token=OP)
    assert error_code(missing) == "cohort-not-found"
    data(gql(secured, """mutation($i: ID!) { abortInstance(instanceId: $i) { changed } }""",
             {"i": parent_id}, token=OP))
    refused = gql(secured, REDRIVE, {"p": parent_id, "a": "translate"}, token=OP)
    assert error_code(refused) == "redrive-not-allowed"
    assert refused["errors"][0]["extensions"]["details"]["reason"] == "parent-finished"
