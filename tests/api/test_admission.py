"""Admission through the API: ``pauseCohort``/``resumeCohort`` (operator, keyed, no-ops,
``cohort-not-found``), ``Cohort.paused/pausedReason/maxActivePerKey/startRate/keys``,
``Subworkflow.priority/key``, ``updateCohort(maxActivePerKey, startRate)`` and
``cohortChanged`` carrying a pause."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import data, error_code, gql
from tests.api.test_subscriptions import socket
from tests.api.test_window import start_cohort
from tests.engine.outcome_defs import worker
from tests.engine.test_admission import KEY, PRIORITY, admitted

pytestmark = pytest.mark.lake

COHORT = """query($p: ID!, $after: String) { cohort(parentId: $p, activity: "translate") {
  active queued paused pausedReason maxActivePerKey startRate
  keys(first: 1, after: $after) { nodes { key active queued } totalCount
                                  pageInfo { hasNextPage endCursor } }
  rows { rowKey status childId priority key } } }"""
PAUSE = """mutation($p: ID!, $a: String!, $r: String, $k: String) {
  pauseCohort(parentId: $p, activity: $a, reason: $r, idempotencyKey: $k) {
    paused pausedReason active queued } }"""
RESUME = """mutation($p: ID!, $a: String!, $k: String) {
  resumeCohort(parentId: $p, activity: $a, idempotencyKey: $k) {
    paused pausedReason active queued } }"""
UPDATE = """mutation($p: ID!, $k: Int, $r: JSON) { updateCohort(parentId: $p,
  activity: "translate", maxActivePerKey: $k, startRate: $r) {
    active maxActivePerKey startRate } }"""
FINISH = """mutation($i: ID!) { fireAction(instanceId: $i, activity: "task", action: "finish",
  params: {words: 1}) { changed } }"""


def cohort(client: TestClient, parent_id: str, after: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = data(gql(client, COHORT, {"p": parent_id, "after": after}))["cohort"]
    return found


def test_pause_and_resume_through_the_api(client: TestClient) -> None:
    parent_id = start_cohort(client, [admitted(2), worker()])
    paused = data(gql(client, PAUSE, {"p": parent_id, "a": "translate",
                                      "r": "search is down", "k": "p1"}))["pauseCohort"]
    assert paused == {"paused": True, "pausedReason": "search is down", "active": 2,
                      "queued": 3}
    again = data(gql(client, PAUSE, {"p": parent_id, "a": "translate", "r": "else"}))
    assert again["pauseCohort"]["pausedReason"] == "search is down"  # a no-op
    replay = data(gql(client, PAUSE, {"p": parent_id, "a": "translate",
                                      "r": "search is down", "k": "p1"}))
    assert replay["pauseCohort"]["paused"] is True
    reused = gql(client, RESUME, {"p": parent_id, "a": "translate", "k": "p1"})
    assert error_code(reused) == "contract-violation"
    rows = cohort(client, parent_id)["rows"]
    data(gql(client, FINISH, {"i": rows[0]["childId"]}))
    held = cohort(client, parent_id)
    assert (held["active"], held["queued"], held["paused"]) == (1, 3, True)
    resumed = data(gql(client, RESUME, {"p": parent_id, "a": "translate"}))["resumeCohort"]
    assert resumed == {"paused": False, "pausedReason": None, "active": 2, "queued": 2}
    noop = data(gql(client, RESUME, {"p": parent_id, "a": "translate"}))["resumeCohort"]
    assert noop["paused"] is False
    for verb in (PAUSE, RESUME):
        refused = gql(client, verb, {"p": parent_id, "a": "edit"})
        assert error_code(refused) == "cohort-not-found"


def test_pause_and_resume_need_the_operator_role(secured: TestClient) -> None:
    parent_id = start_cohort(secured, [admitted(2), worker()], "op-token-for-tests",
                             "admin-token-for-tests")
    for verb in (PAUSE, RESUME):
        refused = gql(secured, verb, {"p": parent_id, "a": "translate"},
                      token="view-token-for-tests")
        assert error_code(refused) == "forbidden"
    allowed = gql(secured, PAUSE, {"p": parent_id, "a": "translate"},
                  token="op-token-for-tests")
    assert data(allowed)["pauseCohort"]["paused"] is True


def test_priority_keys_and_the_admission_settings_are_shown(client: TestClient) -> None:
    parent_id = start_cohort(client, [admitted(3, priority=PRIORITY, concurrencyKey=KEY,
                                               maxActivePerKey=1,
                                               startRate={"count": 10, "perSeconds": 60}),
                                       worker()])
    found = cohort(client, parent_id)
    assert (found["maxActivePerKey"], found["startRate"]) == (
        1, {"count": 10, "perSeconds": 60.0})
    assert {r["rowKey"]: (r["status"], r["priority"], r["key"]) for r in found["rows"]} == {
        "a": ("ACTIVE", 0.0, "x"), "b": ("QUEUED", 0.0, "x"), "c": ("QUEUED", 5.0, "y"),
        "d": ("QUEUED", 0.0, "y"), "e": ("ACTIVE", 10.0, "y")}
    first = found["keys"]
    assert first["nodes"] == [{"key": "x", "active": 1, "queued": 1}]
    assert first["totalCount"] == 2 and first["pageInfo"]["hasNextPage"] is True
    second = cohort(client, parent_id, first["pageInfo"]["endCursor"])["keys"]
    assert second["nodes"] == [{"key": "y", "active": 1, "queued": 2}]
    assert second["pageInfo"]["hasNextPage"] is False
    assert error_code(gql(client, COHORT, {"p": parent_id, "after": "nope"})) == "invalid-input"
    updated = data(gql(client, UPDATE, {"p": parent_id, "k": 2,
                                        "r": {"count": 20, "perSeconds": 60}}))["updateCohort"]
    assert updated == {"active": 3, "maxActivePerKey": 2,
                       "startRate": {"count": 20, "perSeconds": 60.0}}
    refused = gql(client, UPDATE, {"p": parent_id, "r": {"count": 0, "perSeconds": 60}})
    assert error_code(refused) == "invalid-input"


def test_cohort_changed_carries_a_pause(client: TestClient) -> None:
    parent_id = start_cohort(client, [admitted(2), worker()])
    query = """subscription($p: ID!) { cohortChanged(parentId: $p, activity: "translate") {
      paused pausedReason active queued } }"""
    with socket(client) as ws:
        ws.subscribe(query, {"p": parent_id})
        first = ws.next()["data"]["cohortChanged"]
        assert first["paused"] is False
        data(gql(client, PAUSE, {"p": parent_id, "a": "translate", "r": "hold"}))
        event = ws.next()["data"]["cohortChanged"]
        assert (event["paused"], event["pausedReason"]) == (True, "hold")
