"""Unstorable inputs are refused as ``invalid-input`` before a resolver runs.

A lone UTF-16 surrogate in any string argument used to reach the lake's
BSON encoder and answer ``internal-error`` with a logged traceback; ``NaN``
and ``Infinity`` in a ``putDocument`` were stored and echoed back as invalid
JSON (docs/security.md, "Inputs").
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from graphql import parse
from starlette.testclient import TestClient

from kinflow.schema.input_hygiene import request_problem
from tests.api.conftest import error_code, gql

pytestmark = pytest.mark.lake

LONE = "\ud800"


def _raw(client: TestClient, body: str) -> dict[str, Any]:
    response = client.post("/graphql", content=body.encode("ascii"),
                           headers={"Content-Type": "application/json"})  # fmt: skip
    assert response.status_code < 500, response.text
    parsed: dict[str, Any] = response.json()
    return parsed


@pytest.mark.parametrize("query, variables", [
    ("query($id: ID!) { instance(id: $id) { id } }", {"id": f"x{LONE}"}),
    ("mutation($d: JSON!) { putDocument(document: $d) }",
     {"d": {"_id": "article-x", "_type": "article", "title": f"a{LONE}"}}),
    ("mutation($w: String!) { startInstance(definition: $w) { __typename } }", {"w": f"w{LONE}"}),
])  # fmt: skip
def test_a_lone_surrogate_is_invalid_input(client: TestClient, query: str,
                                           variables: dict[str, Any],
                                           caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    caplog.set_level(logging.ERROR)
    body = _raw(client, json.dumps({"query": query, "variables": variables}))
    assert error_code(body) == "invalid-input"
    assert "surrogate" in body["errors"][0]["extensions"]["details"]["problem"]
    assert not [r for r in caplog.records if "internal error" in r.getMessage()]


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_number_is_refused_and_not_stored(client: TestClient, number: str) -> None:
    query = "mutation($d: JSON!) { putDocument(document: $d) }"
    body = (f'{{"query": {json.dumps(query)}, "variables": {{"d": {{"_id": "article-nan", '
            f'"_type": "article", "score": {number}}}}}}}')
    answer = _raw(client, body)
    assert error_code(answer) == "invalid-input"
    assert "finite" in answer["errors"][0]["extensions"]["details"]["problem"]
    stored = gql(client, """query { groq(query: "*[_id == 'article-nan'][0]") }""")
    assert stored["data"]["groq"] is None


def test_a_huge_float_literal_is_refused(client: TestClient) -> None:
    body = gql(client, 'mutation { putDocument(document: {_id: "article-big", _type: "article", '
                       "score: 1e999}) }")
    assert error_code(body) == "invalid-input"


def test_ordinary_unicode_passes_the_check() -> None:
    document = parse('mutation { putDocument(document: {title: "Grüße 🌍", score: 1.5}) }')
    variables = {"d": {"t": "日本", "n": 2.5, "l": [1, "ok"]}}
    assert request_problem("Grüße", document, variables) is None
    assert request_problem(None, None, {"d": [{"x": float("nan")}]}) == (
        "variables.d[0].x: a number that is not finite")
