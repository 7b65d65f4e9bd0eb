"""``Cohort.page`` through GraphQL: cursors, filters, ``totalCount`` and refusals."""

from __future__ import annotations

import time
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import data, error_code, gql
from tests.api.test_subscriptions import socket
from tests.engine.cohort_defs import items, windowed
from tests.engine.outcome_defs import worker

pytestmark = pytest.mark.lake

NAMES = [f"r{i:02d}" for i in range(40)]
PAGE = """query($p: ID!, $first: Int, $after: String, $where: CohortFilter) {
  cohort(parentId: $p, activity: "translate") {
    total active queued done failed cancelled
    page(first: $first, after: $after, where: $where) {
      totalCount pageInfo { hasNextPage endCursor }
      nodes { rowKey status outcome outputs childId attempt } } } }"""
FIRE = """mutation($i: ID!, $a: String!, $p: JSON) {
  fireAction(instanceId: $i, activity: "task", action: $a, params: $p) { changed } }"""


def started(client: TestClient) -> str:
    data(gql(client, "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }",
             {"d": [windowed(10), worker()]}))
    begun = data(gql(client, """mutation($f: JSON) { startInstance(definition: "p", fields: $f)
        { instance { id } } }""", {"f": items(*NAMES)}))
    parent_id: str = begun["startInstance"]["instance"]["id"]
    data(gql(client, """mutation($i: ID!) { fireAction(instanceId: $i, activity: "go",
        action: "go") { changed } }""", {"i": parent_id}))
    return parent_id


def page(client: TestClient, parent_id: str, **variables: Any) -> dict[str, Any]:
    cohort: dict[str, Any] = data(gql(client, PAGE, {"p": parent_id, **variables}))["cohort"]
    return cohort


def test_pages_walk_the_cohort_and_filters_select_through_graphql(
        client: TestClient) -> None:
    parent_id = started(client)
    first = page(client, parent_id, first=15)
    assert (first["total"], first["active"], first["queued"]) == (40, 10, 30)
    seen, after = [], None
    while True:
        got = page(client, parent_id, first=15, after=after)["page"]
        assert got["totalCount"] == 40
        seen += [n["rowKey"] for n in got["nodes"]]
        if not got["pageInfo"]["hasNextPage"]:
            break
        after = got["pageInfo"]["endCursor"]
    assert seen == NAMES

    ids = {n["rowKey"]: n["childId"] for n in first["page"]["nodes"]}
    data(gql(client, FIRE, {"i": ids["r00"], "a": "finish", "p": {"words": 120}}))
    data(gql(client, FIRE, {"i": ids["r01"], "a": "give-up"}))
    deadline = time.monotonic() + 10  # a cohort this large is stamped in background rounds
    settled = page(client, parent_id, where={"status": ["DONE"]})
    while settled["done"] < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
        settled = page(client, parent_id, where={"status": ["DONE"]})
    assert (settled["done"], settled["failed"], settled["active"], settled["queued"]) == \
        (2, 1, 10, 28)
    assert [(n["rowKey"], n["outcome"]) for n in settled["page"]["nodes"]] == [
        ("r00", "succeeded"), ("r01", "failed")]
    assert settled["page"]["totalCount"] == 2
    assert settled["page"]["nodes"][0]["outputs"] == {"wordCount": 120, "item": "r00"}
    wordy = page(client, parent_id, where={"where": "outputs.wordCount > 100"})["page"]
    assert [n["rowKey"] for n in wordy["nodes"]] == ["r00"] and wordy["totalCount"] == 1
    queued = page(client, parent_id, first=5, where={"status": ["QUEUED"]})["page"]
    assert [n["rowKey"] for n in queued["nodes"]] == NAMES[12:17]
    assert queued["totalCount"] == 28 and queued["pageInfo"]["hasNextPage"]


def test_a_bad_cursor_or_page_size_is_invalid_input(client: TestClient) -> None:
    parent_id = started(client)
    for variables in ({"after": "garbage"}, {"first": 0}, {"first": 100_000},
                      {"where": {"where": "outputs.("}}):
        body = gql(client, PAGE, {"p": parent_id, **variables})
        assert error_code(body) in ("invalid-input", "groq-syntax"), variables


def test_cohort_changed_events_page_their_rows_too(client: TestClient) -> None:
    parent_id = started(client)
    with socket(client) as ws:
        ws.subscribe("""subscription($p: ID!) { cohortChanged(parentId: $p,
            activity: "translate") { queued cancelled page(first: 3, where: {status: [QUEUED]})
            { totalCount pageInfo { hasNextPage } nodes { rowKey status outcome attempt } } } }""",
                     {"p": parent_id})
        first = ws.next()["data"]["cohortChanged"]
    assert (first["queued"], first["cancelled"]) == (30, 0)
    assert first["page"]["totalCount"] == 30 and first["page"]["pageInfo"]["hasNextPage"]
    assert first["page"]["nodes"] == [{"rowKey": k, "status": "QUEUED", "outcome": None,
                                       "attempt": 1} for k in NAMES[10:13]]
