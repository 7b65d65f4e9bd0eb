"""``instances(newestFirst: true)``: the most recently started first, children included
(their ids are hashes of their parent's, so an id order would scatter them)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import data, error_code, gql
from tests.api.test_finished_families import review_with_cohort

pytestmark = pytest.mark.lake

EVERY = """query($after: String, $first: Int) { instances(first: $first, after: $after,
  newestFirst: true) { totalCount nodes { id startedAt } pageInfo { hasNextPage endCursor } } }"""
START = """mutation { startInstance(definition: "article-review",
  fields: {subject: "article-1"}) { instance { id } } }"""


def pages(client: TestClient, first: int) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    after = None
    while True:
        found = data(gql(client, EVERY, {"after": after, "first": first}))["instances"]
        nodes += found["nodes"]
        if not found["pageInfo"]["hasNextPage"]:
            return nodes
        after = found["pageInfo"]["endCursor"]


def test_newest_first_lists_children_by_start_time_across_pages(client: TestClient) -> None:
    older, children = review_with_cohort(client)
    time.sleep(0.01)  # the newer root starts in a later millisecond than the children
    newer = data(gql(client, START))["startInstance"]["instance"]["id"]
    whole = pages(client, 100)
    ids = [n["id"] for n in whole]
    assert ids[0] == newer and ids[-1] == older
    assert set(ids[1:-1]) == set(children.values())
    started = [(n["startedAt"], n["id"]) for n in whole]
    assert started == sorted(started, reverse=True)
    assert [n["id"] for n in pages(client, 2)] == ids  # pages of two: the same order


def test_a_cursor_of_another_order_is_refused(client: TestClient) -> None:
    review_with_cohort(client)
    by_id = data(gql(client, "{ instances(first: 1) { pageInfo { endCursor } } }"))
    cursor = by_id["instances"]["pageInfo"]["endCursor"]
    assert error_code(gql(client, EVERY, {"after": cursor, "first": 1})) == "invalid-input"
    assert error_code(gql(client, EVERY, {"after": "not-a-cursor", "first": 1})) == "invalid-input"
