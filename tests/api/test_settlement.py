"""Settlement through the API: Subworkflow.startedAt/deadlineAt/retryAt, Cohort.retrying/
timedOut/complete and CohortFilter.outcome timed-out (docs/subworkflows.md#settlement)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import data, gql
from tests.api.test_window import start_cohort
from tests.engine.outcome_defs import worker
from tests.engine.settle_defs import settling

pytestmark = pytest.mark.lake

COHORT = """query($p: ID!) { cohort(parentId: $p, activity: "translate") {
  total queued failed aborted retrying timedOut complete
  rows { rowKey childId status outcome attempt abortReason startedAt deadlineAt retryAt }
  page(where: {outcome: ["timed-out"]}) { totalCount } } }"""
FAIL = """mutation($i: ID!) { fireAction(instanceId: $i, activity: "task",
  action: "give-up") { changed } }"""
TICK = """mutation($i: ID!) { tick(instanceId: $i) { changed } }"""


def cohort(client: TestClient, parent_id: str) -> dict[str, Any]:
    found: dict[str, Any] = data(gql(client, COHORT, {"p": parent_id}))["cohort"]
    return found


def test_a_retry_waits_queued_with_its_time(client: TestClient) -> None:
    parent_id = start_cohort(client, [settling(
        maxActive=2, retry={"attempts": 2, "backoffSeconds": 3600}), worker()])
    before = cohort(client, parent_id)
    rows = {r["rowKey"]: r for r in before["rows"]}
    assert rows["a"]["startedAt"] and rows["a"]["deadlineAt"] is None
    assert rows["c"]["startedAt"] is None and before["retrying"] == 0
    data(gql(client, FAIL, {"i": rows["a"]["childId"]}))
    after = cohort(client, parent_id)
    again = {r["rowKey"]: r for r in after["rows"]}
    assert again["a"]["status"] == "QUEUED" and again["a"]["attempt"] == 2
    assert again["a"]["retryAt"] and again["a"]["startedAt"] is None
    assert again["a"]["childId"] == f"{rows['a']['childId']}-a2"
    assert after["retrying"] == 1 and after["failed"] == 0
    assert again["c"]["startedAt"]  # a's place went to the next queued row


def test_timed_out_rows_are_counted_filtered_and_complete_the_cohort(
        client: TestClient) -> None:
    parent_id = start_cohort(client, [settling(
        childTimeoutSeconds=0.2, completeWhen="$cohort.timedOut >= 5"), worker()])
    first = cohort(client, parent_id)
    assert first["timedOut"] == 0 and first["complete"] is False
    assert all(r["deadlineAt"] for r in first["rows"])
    time.sleep(0.3)
    data(gql(client, TICK, {"i": parent_id}))
    after = cohort(client, parent_id)
    assert after["timedOut"] == 5 and after["failed"] == 5
    assert {r["outcome"] for r in after["rows"]} == {"timed-out"}
    assert {r["status"] for r in after["rows"]} == {"ABORTED"}
    assert after["page"]["totalCount"] == 5
    assert after["complete"] is True
