"""/graphql's transports: CORS, typed JSON refusals, subscriptions only over websockets,
and the legacy graphql-ws protocol running queries and mutations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from kinflow.errors import ConfigurationError
from kinflow.http.app import create_app
from kinflow.settings import Settings
from tests.api.conftest import data, make_settings

pytestmark = pytest.mark.lake
FRONTEND = "http://127.0.0.1:5173"
TOKENS = "viewer-token-0123456=vera:viewer,operator-token-012345=otto:operator"
PUT = 'mutation { putDocument(document: {_id: "note-1", _type: "note", n: 1}) }'
SUBSCRIBE = 'subscription { documentChanged(id: "note-1") }'


@pytest.fixture
def cors(lake_uri: str, database: str) -> Iterator[TestClient]:
    settings = make_settings(lake_uri, database, allowed_origins=[FRONTEND])
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture
def cors_tokens(lake_uri: str, database: str) -> Iterator[TestClient]:
    settings = make_settings(lake_uri, database, allowed_origins=f"{FRONTEND}/",
                             api_tokens=TOKENS)  # fmt: skip
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def preflight(client: TestClient, origin: str, method: str = "POST",
              headers: str = "authorization,content-type") -> Any:  # fmt: skip
    return client.options("/graphql", headers={
        "Origin": origin, "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": headers})


def refusal(response: Any, status: int, code: str) -> dict[str, Any]:
    """Assert a transport refusal in the API's error shape; returns its details."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["data"] is None and len(body["errors"]) == 1
    error = body["errors"][0]
    assert isinstance(error["message"], str) and error["message"]
    assert error["extensions"]["code"] == code, body
    details: dict[str, Any] = error["extensions"]["details"]
    return details


# -- CORS ------------------------------------------------------------------


def test_cors_preflight_and_responses_for_an_allowed_origin(cors_tokens: TestClient) -> None:
    allowed = preflight(cors_tokens, FRONTEND)  # a preflight carries no token
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == FRONTEND
    assert "POST" in allowed.headers["access-control-allow-methods"]
    allowed_headers = allowed.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed_headers and "content-type" in allowed_headers
    assert "access-control-allow-credentials" not in allowed.headers
    auth = {"Origin": FRONTEND, "Authorization": "Bearer operator-token-012345"}
    written = cors_tokens.post("/graphql", json={"query": PUT}, headers=auth)
    assert written.headers["access-control-allow-origin"] == FRONTEND
    assert data(written.json())["putDocument"]["_id"] == "note-1"
    read = cors_tokens.get("/graphql", params={"query": "{ definitions { name } }"},
                           headers=auth)  # fmt: skip
    assert read.status_code == 200 and read.headers["access-control-allow-origin"] == FRONTEND
    unauthenticated = cors_tokens.post("/graphql", json={"query": PUT},
                                       headers={"Origin": FRONTEND})  # fmt: skip
    assert unauthenticated.status_code == 401  # readable by the page: it can tell why
    assert unauthenticated.headers["access-control-allow-origin"] == FRONTEND


def test_cors_refuses_other_origins_methods_and_headers(cors: TestClient) -> None:
    for origin, method, headers, refused in (
        ("http://evil.example", "POST", "content-type", ["origin"]),
        ("http://127.0.0.1:5174", "POST", "content-type", ["origin"]),
        (FRONTEND, "PUT", "content-type", ["method"]),
        (FRONTEND, "POST", "content-type,x-evil", ["headers"]),
    ):
        response = preflight(cors, origin, method, headers)
        details = refusal(response, 403, "origin-not-allowed")
        assert details["refused"] == refused and details["origin"] == origin
        if "origin" in refused:
            assert "access-control-allow-origin" not in response.headers
    simple = cors.post("/graphql", json={"query": "{ definitions { name } }"},
                       headers={"Origin": "http://evil.example"})  # fmt: skip
    assert simple.status_code == 200 and "access-control-allow-origin" not in simple.headers


def test_no_origin_is_allowed_by_default_and_same_origin_is_unaffected(
        client: TestClient) -> None:
    refusal(preflight(client, FRONTEND), 403, "origin-not-allowed")
    cross = client.post("/graphql", json={"query": PUT}, headers={"Origin": FRONTEND})
    assert "access-control-allow-origin" not in cross.headers
    same = client.post("/graphql", json={"query": "{ definitions { name } }"},
                       headers={"Origin": "http://testserver"})  # fmt: skip
    assert same.status_code == 200 and data(same.json()) == {"definitions": []}
    with pytest.raises(WebSocketDisconnect):
        with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"],
                                      headers={"Origin": FRONTEND}):  # fmt: skip
            pass


def test_websockets_follow_the_same_origins(cors: TestClient) -> None:
    with cors.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"],
                                headers={"Origin": FRONTEND}) as ws:  # fmt: skip
        ws.send_json({"type": "connection_init"})
        assert ws.receive_json()["type"] == "connection_ack"
    with pytest.raises(WebSocketDisconnect):
        with cors.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"],
                                    headers={"Origin": "http://evil.example"}):  # fmt: skip
            pass


def test_origins_and_hosts_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a shell sets them: one origin as plain text, a comma list, or a JSON list."""
    monkeypatch.setenv("KINFLOW_ALLOWED_ORIGINS", FRONTEND)
    monkeypatch.setenv("KINFLOW_ALLOWED_HOSTS", "flow.example.com, kinflow.internal")
    settings = Settings(_env_file=None)
    assert settings.allowed_origins == [FRONTEND]
    assert settings.allowed_hosts == ["flow.example.com", "kinflow.internal"]
    monkeypatch.setenv("KINFLOW_ALLOWED_ORIGINS", f'["{FRONTEND}", "https://app.example"]')
    assert Settings(_env_file=None).allowed_origins == [
        FRONTEND, "https://app.example"]


def test_a_wildcard_origin_needs_tokens(lake_uri: str, database: str) -> None:
    with pytest.raises(ConfigurationError):
        create_app(make_settings(lake_uri, database, allowed_origins=["*"]))


# -- typed JSON refusals ---------------------------------------------------


def test_every_transport_failure_is_typed_json(client: TestClient) -> None:
    body = "application/json"
    cases: list[tuple[str, dict[str, Any], int, str]] = [
        ("POST", {"content": b"{not json", "headers": {"Content-Type": body}}, 400,
         "invalid-json"),
        ("POST", {"json": {}}, 400, "query-missing"),
        ("POST", {"json": {"query": None, "variables": {}}}, 400, "query-missing"),
        ("GET", {"headers": {"Accept": "application/json"}}, 400, "query-missing"),
        ("POST", {"content": b"{ definitions { name } }",
                  "headers": {"Content-Type": "text/plain"}}, 415, "unsupported-content-type"),
        ("POST", {"content": b'{"query": "{ definitions { name } }"}'}, 415,
         "unsupported-content-type"),
        ("POST", {"data": {"query": "{ definitions { name } }"}}, 415,
         "unsupported-content-type"),
        ("PUT", {"json": {"query": "{ definitions { name } }"}}, 405, "method-not-allowed"),
        ("DELETE", {}, 405, "method-not-allowed"),
        ("PATCH", {"json": {}}, 405, "method-not-allowed"),
        ("OPTIONS", {}, 405, "method-not-allowed"),
        ("GET", {"params": {"query": PUT}}, 405, "mutation-needs-post"),
        ("GET", {"params": {"query": "{ definitions { name } }", "variables": "{x"}}, 400,
         "invalid-json"),
        ("POST", {"json": {"query": 5}}, 400, "request-invalid"),
        ("POST", {"json": {"query": "{ definitions { name } }", "variables": [1]}}, 400,
         "request-invalid"),
        ("POST", {"json": [{"query": "{ definitions { name } }"}]}, 400, "request-invalid"),
        ("POST", {"json": {"query": "query A { definitions { name } }",
                           "operationName": "B"}}, 400, "request-invalid"),
    ]  # fmt: skip
    for method, options, status, code in cases:
        response = client.request(method, "/graphql", **options)
        details = refusal(response, status, code)
        if status == 405:
            assert response.headers["allow"] in ("GET, POST", "POST")
        if code == "unsupported-content-type":
            assert details["expected"] == "application/json"
    # a GraphQL error (not a transport failure) stays a 200 with its own shape
    syntax = client.post("/graphql", json={"query": "{ definitions { name "})
    assert syntax.status_code == 200 and syntax.json()["errors"]


def test_graphiql_turned_off_is_a_typed_404(lake_uri: str, database: str) -> None:
    with TestClient(create_app(make_settings(lake_uri, database, graphiql=False))) as http:
        refusal(http.get("/graphql", headers={"Accept": "text/html"}), 404, "graphiql-disabled")


def test_a_subscription_over_http_is_refused_with_a_code(
        client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    multi = 'query Q { definitions { name } } subscription S { documentChanged(id: "note-1") }'
    for response in (
        client.post("/graphql", json={"query": SUBSCRIBE}),
        client.get("/graphql", params={"query": SUBSCRIBE}),
        client.post("/graphql", json={"query": 'subscription { cohortChanged(parentId: "p", '
                                               'activity: "a") { total } }'}),
        client.post("/graphql", json={"query": multi, "operationName": "S"}),
    ):
        details = refusal(response, 400, "subscription-needs-websocket")
        assert details["transports"] == ["graphql-transport-ws", "graphql-ws"]
    query_named = client.post("/graphql", json={"query": multi, "operationName": "Q"})
    assert data(query_named.json()) == {"definitions": []}
    mentions = client.post("/graphql", json={
        "query": '{ groq(query: "*[_type == \\"subscription\\"]") }'})  # fmt: skip
    assert data(mentions.json()) == {"groq": []}
    assert "internal" not in caplog.text.lower()


# -- the legacy graphql-ws protocol ----------------------------------------


def legacy_run(ws: Any, op: str, query: str) -> dict[str, Any]:
    """One query or mutation over graphql-ws: its ``data`` message, then ``complete``."""
    ws.send_json({"id": op, "type": "start", "payload": {"query": query, "variables": {}}})
    message = ws.receive_json()
    assert message["type"] == "data" and message["id"] == op, message
    assert ws.receive_json() == {"id": op, "type": "complete"}
    payload: dict[str, Any] = message["payload"]
    return payload


def test_the_legacy_protocol_runs_queries_and_mutations(client: TestClient) -> None:
    with client.websocket_connect("/graphql", subprotocols=["graphql-ws"]) as ws:
        ws.send_json({"type": "connection_init", "payload": {}})
        assert ws.receive_json()["type"] == "connection_ack"
        assert data(legacy_run(ws, "1", "{ definitions { name } }")) == {"definitions": []}
        assert data(legacy_run(ws, "2", PUT))["putDocument"]["_id"] == "note-1"
        read = legacy_run(ws, "3", '{ groq(query: "*[_id == \\"note-1\\"][0].n") }')
        assert data(read) == {"groq": 1}
        ws.send_json({"id": "4", "type": "start", "payload": {"query": SUBSCRIBE}})
        first = ws.receive_json()
        assert first["type"] == "data" and first["payload"]["data"]["documentChanged"]["n"] == 1
        ws.send_json({"id": "4", "type": "stop"})
        assert ws.receive_json() == {"id": "4", "type": "complete"}
        ws.send_json({"id": "5", "type": "start", "payload": {"query": "{ nope }"}})
        error = ws.receive_json()
        assert error["type"] == "error" and error["id"] == "5"


def test_the_legacy_protocol_keeps_auth_and_roles(cors_tokens: TestClient) -> None:
    with cors_tokens.websocket_connect("/graphql", subprotocols=["graphql-ws"]) as ws:
        ws.send_json({"type": "start", "id": "0", "payload": {"query": PUT}})
        with pytest.raises(WebSocketDisconnect) as closed:  # nothing runs before the ack
            ws.receive_json()
        assert closed.value.code == 4401
    with cors_tokens.websocket_connect("/graphql", subprotocols=["graphql-ws"]) as ws:
        ws.send_json({"type": "connection_init", "payload": {"token": "viewer-token-0123456"}})
        assert ws.receive_json()["type"] == "connection_ack"
        refused = legacy_run(ws, "1", PUT)
        assert refused["errors"][0]["extensions"]["code"] == "forbidden", json.dumps(refused)
        assert data(legacy_run(ws, "2", "{ definitions { name } }")) == {"definitions": []}
    with cors_tokens.websocket_connect("/graphql", subprotocols=["graphql-ws"]) as ws:
        ws.send_json({"type": "connection_init",
                      "payload": {"authorization": "Bearer operator-token-012345"}})
        assert ws.receive_json()["type"] == "connection_ack"
        assert data(legacy_run(ws, "1", PUT))["putDocument"]["_id"] == "note-1"
