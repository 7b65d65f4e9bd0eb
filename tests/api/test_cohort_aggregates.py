"""``Cohort.aggregates`` through the API (docs/subworkflows.md#cohort-and-aggregates)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import data, gql
from tests.api.test_window import start_cohort
from tests.engine.cohort_defs import parent
from tests.engine.outcome_defs import worker

pytestmark = pytest.mark.lake

COHORT = """query($p: ID!) { cohort(parentId: $p, activity: "translate") {
  total aggregates rows { rowKey childId } } }"""
FINISH = """mutation($i: ID!, $w: Float) { fireAction(instanceId: $i, activity: "task",
  action: "finish", params: {words: $w}) { changed } }"""


def test_cohort_aggregates_follow_the_finished_rows(client: TestClient) -> None:
    definition = parent(settled="false")
    spawn = definition["stages"][1]["activities"][0]["actions"][0]["spawn"]
    spawn["aggregate"] = {"words": "sum(outputs.wordCount)", "most": "max(outputs.wordCount)",
                          "big": "count(outputs.wordCount > 15)"}
    parent_id = start_cohort(client, [definition, worker()])
    before = data(gql(client, COHORT, {"p": parent_id}))["cohort"]
    assert before["aggregates"] == {"words": 0, "most": None, "big": 0}
    ids = {r["rowKey"]: r["childId"] for r in before["rows"]}
    for key, words in (("a", 10), ("b", 20)):
        data(gql(client, FINISH, {"i": ids[key], "w": words}))
    after = data(gql(client, COHORT, {"p": parent_id}))["cohort"]
    assert after["aggregates"] == {"words": 30, "most": 20, "big": 1}


def test_a_cohort_without_aggregate_reads_null(client: TestClient) -> None:
    parent_id = start_cohort(client, [parent(), worker()])
    assert data(gql(client, COHORT, {"p": parent_id}))["cohort"]["aggregates"] is None
