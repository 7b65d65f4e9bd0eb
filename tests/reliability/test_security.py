"""Security: every mutation needs a token and a strong enough role, over HTTP and websockets;
subscriptions need a token; the GROQ field cannot write; query bombs are refused.

The mutation list is read from ``schema.graphql``, so a new mutation without
an entry here fails the sweep instead of escaping it. After every refusal
sweep the whole database must be unchanged.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from kinflow.http.app import create_app
from kinflow.settings import Settings
from tests.reliability.family import ROOT
from tests.reliability.figures import record

pytestmark = pytest.mark.lake
TOKENS = ("view-token-for-tests=vera:viewer,op-token-for-tests=otto:operator,"
          "admin-token-for-tests=ada:admin")
ADMIN_ONLY = {"deployDefinitions", "setStage", "resetActivity", "purgeInstances", "holdFamily",
              "releaseFamily"}
"""Mutations an operator may not call (kinflow/schema/roles.py's admin entries; a test
of tests/api/test_roles.py keeps the two and the sweep below in agreement)."""
MUTATIONS: dict[str, str] = {
    "deployDefinitions": "deployDefinitions(definitions: [{}]) { definitions { name } }",
    "startInstance": "startInstance(definition: \"d\") { changed }",
    "fireAction": "fireAction(instanceId: \"i\", activity: \"a\", action: \"b\") { changed }",
    "editField": "editField(instanceId: \"i\", field: \"f\", value: 1) { changed }",
    "completeEffect": "completeEffect(instanceId: \"i\", effectKey: \"k\", status: DONE) "
                      "{ changed }",
    "abortInstance": "abortInstance(instanceId: \"i\") { changed }",
    "cancelInstance": "cancelInstance(instanceId: \"i\") { changed }",
    "tick": "tick(instanceId: \"i\") { changed }",
    "updateCohort": "updateCohort(parentId: \"i\", activity: \"a\", maxActive: 2) { total }",
    "pauseCohort": "pauseCohort(parentId: \"i\", activity: \"a\") { paused }",
    "resumeCohort": "resumeCohort(parentId: \"i\", activity: \"a\") { paused }",
    "redriveCohort": "redriveCohort(parentId: \"i\", activity: \"a\") { applied }",
    "fireCohort": "fireCohort(parentId: \"i\", activity: \"a\", childActivity: \"c\", "
                  "action: \"b\") { applied }",
    "abortCohort": "abortCohort(parentId: \"i\", activity: \"a\") { applied }",
    "cancelCohort": "cancelCohort(parentId: \"i\", activity: \"a\") { applied }",
    "setStage": "setStage(instanceId: \"i\", stage: \"s\") { changed }",
    "resetActivity": "resetActivity(instanceId: \"i\", activity: \"a\") { changed }",
    "putDocument": "putDocument(document: {_id: \"evil\", _type: \"article\"})",
    "putDocuments": "putDocuments(documents: [{_id: \"evil\", _type: \"article\"}]) { count }",
    "deleteDocument": "deleteDocument(id: \"article-1\")",
    "purgeInstances": "purgeInstances(where: {finishedBefore: \"2100-01-01T00:00:00Z\"}, "
                      "dryRun: false) { roots }",
    "holdFamily": "holdFamily(rootId: \"i\", reason: \"keep\") { id }",
    "releaseFamily": "releaseFamily(rootId: \"i\") { id }",
}
HOSTILE_GROQ = [
    "*", "*[_type == 'article']{..., 'x': *[_id == ^._id]}", "*[_id == $id]",
    "*[_type == 'kinflow.instance']", "count(*)", "*[_id in path('**')]",
    "*[_type == 'article'] | order(_id desc)[0..10]",
]


def schema_mutations() -> set[str]:
    sdl = (ROOT / "schema.graphql").read_text()
    block = sdl.split("type Mutation {", 1)[1].split("\n}", 1)[0]
    return set(re.findall(r"^  (\w+)\(", block, flags=re.M))


@pytest.fixture
def secured(lake_uri: str) -> Iterator[tuple[TestClient, MongoClient[dict[str, Any]], str]]:
    database = f"rel_{uuid.uuid4().hex[:12]}"
    # the sweep sends a wrong token per mutation; throttling has its own tests
    settings = Settings(mongodb_uri=lake_uri, database=database, operation_timeout=20.0,
                        worker=False, api_tokens=TOKENS, auth_max_failures=1000)
    mongo: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    try:
        with TestClient(create_app(settings)) as http:
            http.post("/graphql", headers={"Authorization": "Bearer op-token-for-tests"}, json={
                "query": "mutation { putDocument(document: {_id: \"article-1\", "
                         "_type: \"article\", locales: [\"de\"]}) }"})
            yield http, mongo, database
    finally:
        mongo.drop_database(database)
        mongo.close()


def snapshot(mongo: MongoClient[dict[str, Any]], database: str) -> dict[str, Any]:
    db = mongo[database]
    return {name: list(db[name].find({}).sort("_id", 1))
            for name in sorted(db.list_collection_names())}


def post(http: TestClient, query: str, token: str | None,
         variables: dict[str, Any] | None = None) -> tuple[int, str | None]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = http.post("/graphql", json={"query": query, "variables": variables or {}},
                         headers=headers)
    assert response.status_code < 500, response.text
    errors = response.json().get("errors") or []
    if not errors:
        return response.status_code, None
    # a GraphQL validation error carries no code: the spec types it
    return response.status_code, (errors[0].get("extensions") or {}).get(
        "code", "graphql-validation")


def test_every_mutation_needs_a_token_and_the_role(
        secured: tuple[TestClient, MongoClient[dict[str, Any]], str]) -> None:
    http, mongo, database = secured
    assert schema_mutations() == set(MUTATIONS), "a mutation is missing from the sweep"
    before = snapshot(mongo, database)
    refused = 0
    for name, field in MUTATIONS.items():
        operation = f"mutation {{ {field} }}"
        for token in (None, "not-a-token"):
            status, code = post(http, operation, token)
            assert (status, code) == (401, "unauthenticated"), name
            refused += 1
        weak = ["view-token-for-tests", *(["op-token-for-tests"] if name in ADMIN_ONLY else [])]
        for token in weak:
            status, code = post(http, operation, token)
            assert code == "forbidden", (name, token, code)
            refused += 1
        status, code = post(http, f"query {{ __typename }} mutation M {{ {field} }}",
                            "view-token-for-tests", None)
        assert code is not None, name  # two operations and no name: never runs one
        refused += 1
    assert http.get("/graphql", params={"query": "mutation { tick(instanceId: \"i\") "
                                                 "{ changed } }"},
                    headers={"Authorization": "Bearer admin-token-for-tests"}).status_code >= 400
    refused += 1
    assert snapshot(mongo, database) == before
    record("security-mutations", f"security: {refused} unauthorised mutation attempts over "
                                 f"HTTP refused across {len(MUTATIONS)} mutations")


def _init(ws: Any, payload: dict[str, Any] | None) -> None:
    message: dict[str, Any] = {"type": "connection_init"}
    if payload is not None:
        message["payload"] = payload
    ws.send_json(message)


def test_websockets_need_a_token_and_the_role(
        secured: tuple[TestClient, MongoClient[dict[str, Any]], str]) -> None:
    http, mongo, database = secured
    before = snapshot(mongo, database)
    subscribe = {"query": "subscription { instancesChanged { __typename } }"}
    for payload in (None, {}, {"authorization": "Bearer nope"}):
        with http.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
            _init(ws, payload)
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_json()
            assert closed.value.code == 4403
    with http.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
        ws.send_json({"id": "1", "type": "subscribe", "payload": subscribe})
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 4401  # subscribe before connection_init
    with http.websocket_connect("/graphql", subprotocols=["graphql-ws"]) as ws:
        _init(ws, None)
        assert ws.receive_json()["type"] == "connection_error"
    with http.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
        _init(ws, {"token": "view-token-for-tests"})
        assert ws.receive_json()["type"] == "connection_ack"
        for n, (name, field) in enumerate(MUTATIONS.items()):
            ws.send_json({"id": str(n), "type": "subscribe",
                          "payload": {"query": f"mutation {{ {field} }}"}})
            message = ws.receive_json()
            while message["type"] == "complete":
                message = ws.receive_json()
            assert message["payload"]["errors"][0]["extensions"]["code"] == "forbidden", name
    assert snapshot(mongo, database) == before
    record("security-websockets", f"security: 5 unauthenticated websocket handshakes and "
                                  f"{len(MUTATIONS)} viewer mutations over a websocket refused")


def test_groq_cannot_write_and_bombs_are_refused(
        secured: tuple[TestClient, MongoClient[dict[str, Any]], str]) -> None:
    http, mongo, database = secured
    before = snapshot(mongo, database)
    groq = "query($q: String!, $p: JSON) { groq(query: $q, params: $p) }"
    for text in HOSTILE_GROQ:
        for params in (None, {"id": {"$ne": None}}, {"id": {"$where": "1"}}):
            _status, code = post(http, groq, "view-token-for-tests", {"q": text, "p": params})
            assert code in (None, "groq-syntax", "groq-error", "groq-type-error"), (text, code)
    deep = "{ instance(id: \"i\") { " + "parent { " * 20 + "id" + " }" * 21 + " }"
    aliases = "{ " + " ".join(f"a{n}: __typename" for n in range(200)) + " }"
    tokens = "{ " + " ".join("__typename" for _ in range(5000)) + " }"
    for bomb in (deep, aliases, tokens):
        _status, code = post(http, bomb, "view-token-for-tests")
        assert code == "query-too-complex", (bomb[:60], code)
    assert post(http, "{ __typename }", "view-token-for-tests") == (200, None)
    assert snapshot(mongo, database) == before
    record("security-groq", f"security: {len(HOSTILE_GROQ) * 3} hostile GROQ reads wrote "
                            "nothing; depth, alias and token bombs refused (query-too-complex)")
