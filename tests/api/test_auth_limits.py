"""Tokens and roles on HTTP and websockets; the query safety limits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from kinflow.errors import ConfigurationError
from kinflow.http.app import create_app
from kinflow.http.tokens import bearer, load_tokens, parse_tokens
from kinflow.settings import Settings
from tests.api.conftest import data, error_code, gql, make_settings
from tests.api.test_mutations import DEPLOY, KITCHEN, START

pytestmark = pytest.mark.lake


def test_token_table_formats() -> None:
    a, b, t = "a" * 16, "b" * 20, "t" * 32
    compact = parse_tokens(f"{a}=alice:viewer, {b}=bob:operator|admin")
    assert compact[a].id == "alice" and compact[a].roles == ("viewer",)
    assert compact[b].roles == ("operator", "admin")
    as_json = parse_tokens(f'{{"{t}": {{"id": "tess", "roles": ["admin"]}}}}')
    assert as_json[t].id == "tess"
    for bad in (f"{a}=alice:king", "nonsense", f'{{"{t}": 1}}', f"{a}=alice:"):
        with pytest.raises(ConfigurationError):
            parse_tokens(bad)
    assert bearer("Bearer abc") == "abc" and bearer("abc") == "abc" and bearer("Bearer") is None


def test_tokens_file_is_merged(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text('{"fred-file-token-01": {"id": "fred", "roles": ["viewer"]}}')
    table = load_tokens(Settings(api_tokens="eve-env-token-0001=eve:admin", api_tokens_file=path))
    assert table.enabled and table.lookup("fred-file-token-01").id == "fred"
    assert table.lookup("eve-env-token-0001").id == "eve"
    assert not load_tokens(Settings()).enabled


def test_http_requires_a_known_bearer_token(secured: TestClient) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
        response = secured.post("/graphql", json={"query": "{ definitions { name } }"},
                                headers=headers)  # fmt: skip
        assert response.status_code == 401
        assert response.json()["errors"][0]["extensions"]["code"] == "unauthenticated"
    assert data(gql(secured, "{ definitions { name } }", token="view-token-for-tests")) == {
        "definitions": []}
    # the GraphiQL page itself carries no data and loads without a token
    assert secured.get("/graphql", headers={"Accept": "text/html"}).status_code == 200


def test_roles_gate_the_mutations(secured: TestClient) -> None:
    denied = gql(secured, DEPLOY, {"d": [KITCHEN]}, token="op-token-for-tests")
    assert error_code(denied) == "forbidden"
    assert denied["errors"][0]["extensions"]["details"]["role"] == "admin"
    data(gql(secured, DEPLOY, {"d": [KITCHEN]}, token="admin-token-for-tests"))
    variables = {"def": "kitchen", "f": {"title": "t"}, "id": "k-1"}
    assert error_code(gql(secured, START, variables, token="view-token-for-tests")) == "forbidden"
    started = data(gql(secured, START, variables, token="op-token-for-tests"))["startInstance"]
    assert started["instance"]["id"] == "k-1"
    history = data(gql(secured, '{ instance(id: "k-1") { history { data } } }',
                       token="view-token-for-tests"))  # fmt: skip
    assert history["instance"]["history"][0]["data"]["actor"]["id"] == "otto"
    set_stage = 'mutation { setStage(instanceId: "k-1", stage: "b") { changed } }'
    assert error_code(gql(secured, set_stage, token="op-token-for-tests")) == "forbidden"
    assert data(gql(secured, set_stage, token="admin-token-for-tests"))["setStage"]["changed"]
    tick = 'mutation { tick(instanceId: "k-1") { changed } }'
    assert error_code(gql(secured, tick, token="view-token-for-tests")) == "forbidden"


def _init(ws: object, payload: dict[str, str]) -> None:
    ws.send_json({"type": "connection_init", "payload": payload})  # type: ignore[attr-defined]


def test_websocket_connection_init_needs_a_token(secured: TestClient) -> None:
    with secured.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
        _init(ws, {"authorization": "Bearer wrong"})
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 4403
    with secured.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
        _init(ws, {})
        with pytest.raises(WebSocketDisconnect):
            ws.receive_json()
    with secured.websocket_connect("/graphql", subprotocols=["graphql-ws"]) as ws:
        _init(ws, {"token": "nope"})
        refused = ws.receive_json()
        assert refused["type"] == "connection_error"
        assert refused["payload"]["extensions"]["code"] == "unauthenticated"
    for payload in ({"authorization": "Bearer view-token-for-tests"},
                    {"token": "view-token-for-tests"}):
        with secured.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
            _init(ws, payload)
            assert ws.receive_json()["type"] == "connection_ack"
    with secured.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"],
                                   headers={"Authorization": "Bearer op-token-for-tests"}) as ws:
        _init(ws, {})
        assert ws.receive_json()["type"] == "connection_ack"


def test_a_websocket_mutation_runs_as_the_connection_actor(secured: TestClient) -> None:
    with secured.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
        _init(ws, {"token": "view-token-for-tests"})
        assert ws.receive_json()["type"] == "connection_ack"
        ws.send_json({"id": "1", "type": "subscribe", "payload": {
            "query": DEPLOY, "variables": {"d": [KITCHEN]}}})
        message = ws.receive_json()
        assert message["type"] == "next"
        assert message["payload"]["errors"][0]["extensions"]["code"] == "forbidden"


@pytest.fixture
def strict(lake_uri: str, database: str) -> Iterator[TestClient]:
    settings = make_settings(lake_uri, database, max_query_depth=3, max_query_aliases=2,
                             max_query_tokens=60)  # fmt: skip
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_depth_alias_and_token_limits_are_query_too_complex(strict: TestClient) -> None:
    deep = gql(strict, '{ instance(id: "x") { parent { parent { parent { id } } } } }')
    assert error_code(deep) == "query-too-complex"
    assert deep["errors"][0]["extensions"]["details"]["limit"] == "depth"
    aliases = gql(strict, "{ a: definitions { name } b: definitions { name } "
                          "c: definitions { name } }")  # fmt: skip
    assert error_code(aliases) == "query-too-complex"
    assert aliases["errors"][0]["extensions"]["details"] == {
        "limit": "aliases", "max": 2, "found": 3}
    tokens = gql(strict, "{ " + " ".join(["definitions { name }"] * 20) + " }")
    assert error_code(tokens) == "query-too-complex"
    assert tokens["errors"][0]["extensions"]["details"]["limit"] == "tokens"
    assert data(gql(strict, '{ instance(id: "x") { parent { id } } }')) == {"instance": None}


def test_limits_are_on_by_default() -> None:
    settings = Settings()
    assert settings.max_query_depth and settings.max_query_tokens and settings.max_query_aliases
