"""Security, edge: DNS rebinding against a server without tokens.

A page on ``attacker.example`` whose name is re-pointed at 127.0.0.1 talks to
the API same-origin: ``Host: attacker.example`` and a matching ``Origin``.
Before the Host allow-list it got full admin over HTTP and websockets. Now
every such request is refused (HTTP 421 ``host-not-allowed``, the websocket
before it is accepted) and nothing is written; loopback names and names in
``KINFLOW_ALLOWED_HOSTS`` pass. The last test replays the attack against a
real uvicorn process over raw sockets.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient
from starlette.testclient import TestClient, WebSocketDenialResponse
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from kinflow.http.app import create_app
from kinflow.settings import Settings
from tests.reliability.family import ROOT
from tests.reliability.figures import record
from tests.support import free_port, running

pytestmark = pytest.mark.lake
ATTACKER = "attacker.example"
TOKENS = "admin-token-0123456789=ada:admin"
PUT = 'mutation { putDocument(document: {_id: "pwned", _type: "note"}) }'


@contextmanager
def app_client(lake_uri: str, **overrides: Any) -> Iterator[tuple[TestClient, Any]]:
    database = f"edge_{uuid.uuid4().hex[:12]}"
    settings = Settings(mongodb_uri=lake_uri, database=database, operation_timeout=20.0,
                        worker=False, **overrides)  # fmt: skip
    mongo: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    try:
        with TestClient(create_app(settings), base_url="http://127.0.0.1:8080") as http:
            yield http, mongo[database]
    finally:
        mongo.drop_database(database)
        mongo.close()


def rebinding(host: str = ATTACKER) -> dict[str, str]:
    """The headers a browser sends from a rebound page: its own name as Host and Origin."""
    return {"Host": host, "Origin": f"http://{host}"}


def assert_refused(status: int, body: dict[str, Any], host: str) -> None:
    assert status == 421, body
    assert body["data"] is None
    error = body["errors"][0]
    assert error["extensions"]["code"] == "host-not-allowed"
    assert error["extensions"]["details"] == {"host": host}


def test_rebinding_over_http_is_refused_and_writes_nothing(lake_uri: str) -> None:
    with app_client(lake_uri) as (http, db):
        attempts = 0
        for host in (ATTACKER, f"{ATTACKER}:8080", "127.0.0.1.nip.io:8080", "localhost.evil",
                     "[::2]:8080", "0.0.0.0:8080", ""):  # fmt: skip
            for method, path, body in (("POST", "/graphql", {"query": PUT}),
                                       ("GET", "/graphql?query=%7Bdefinitions%7Bname%7D%7D",
                                        None),
                                       ("GET", "/healthz", None),
                                       ("OPTIONS", "/graphql", None)):  # fmt: skip
                response = http.request(method, path, json=body, headers=rebinding(host))
                assert_refused(response.status_code, response.json(), host)
                attempts += 1
        assert db["production"].find_one({"_id": "pwned"}) is None
        assert "access-control-allow-origin" not in response.headers
    record("security-edge-rebinding-http",
           f"security: {attempts} DNS-rebinding requests over HTTP refused with 421")


def test_rebinding_over_a_websocket_is_refused_before_accept(lake_uri: str) -> None:
    with app_client(lake_uri) as (http, _db):
        for protocol in ("graphql-transport-ws", "graphql-ws"):
            with pytest.raises(WebSocketDenialResponse) as denied:
                with http.websocket_connect("/graphql", subprotocols=[protocol],
                                            headers=rebinding()):  # fmt: skip
                    pass
            assert_refused(denied.value.status_code, denied.value.json(), ATTACKER)


def test_loopback_names_and_configured_hosts_pass(lake_uri: str) -> None:
    with app_client(lake_uri, allowed_hosts=["kinflow.internal", "Flow.Example.COM:443"]) as (
            http, db):
        for host in ("127.0.0.1", "127.0.0.1:8080", "localhost", "LOCALHOST:1", "[::1]",
                     "[::1]:8080", "kinflow.internal", "kinflow.internal:9000",
                     "flow.example.com"):  # fmt: skip
            response = http.post("/graphql", json={"query": PUT}, headers={"Host": host})
            assert response.status_code == 200, (host, response.text)
            assert response.json()["data"]["putDocument"]["_id"] == "pwned"
            with http.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"],
                                        headers={"Host": host}) as ws:  # fmt: skip
                ws.send_json({"type": "connection_init"})
                assert ws.receive_json()["type"] == "connection_ack"
        assert db["production"].count_documents({"_id": "pwned"}) == 1
        refused = http.post("/graphql", json={"query": PUT}, headers=rebinding())
        assert_refused(refused.status_code, refused.json(), ATTACKER)


def test_with_tokens_the_list_applies_only_when_configured(lake_uri: str) -> None:
    """A rebinding page cannot present a token, so with tokens any Host is answered unless
    KINFLOW_ALLOWED_HOSTS narrows it (for instance to the name a proxy forwards)."""
    auth = {"Authorization": "Bearer admin-token-0123456789"}
    with app_client(lake_uri, api_tokens=TOKENS) as (http, _db):
        anonymous = http.post("/graphql", json={"query": PUT}, headers=rebinding())
        assert anonymous.status_code == 401
        behind_proxy = http.post("/graphql", json={"query": "{ definitions { name } }"},
                                 headers={**auth, "Host": "kinflow.example.com"})
        assert behind_proxy.status_code == 200
    with app_client(lake_uri, api_tokens=TOKENS, allowed_hosts=["kinflow.example.com"]) as (
            http, _db):
        ok = http.post("/graphql", json={"query": "{ definitions { name } }"},
                       headers={**auth, "Host": "kinflow.example.com"})
        assert ok.status_code == 200
        refused = http.post("/graphql", json={"query": "{ definitions { name } }"},
                            headers={**auth, **rebinding()})
        assert_refused(refused.status_code, refused.json(), ATTACKER)


@contextmanager
def uvicorn_app(lake_uri: str, database: str, log: Path) -> Iterator[int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KINFLOW_")}
    env.update(KINFLOW_MONGODB_URI=lake_uri, KINFLOW_DATABASE=database, KINFLOW_WORKER="false",
               KINFLOW_OPERATION_TIMEOUT="20")  # fmt: skip
    command = [sys.executable, "-m", "uvicorn", "kinflow.http.app:create_app", "--factory",
               "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]  # fmt: skip
    with (
        log.open("wb") as out,
        running(command, cwd=ROOT, env=env, output=out,
                health_url=f"http://127.0.0.1:{port}/healthz", timeout=60),
    ):
        yield port


def test_rebinding_against_a_real_server(lake_uri: str, tmp_path: Path) -> None:
    database = f"edge_{uuid.uuid4().hex[:12]}"
    mongo: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    try:
        with uvicorn_app(lake_uri, database, tmp_path / "server.log") as port:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("POST", "/graphql", body=json.dumps({"query": PUT}), headers={
                "Host": f"{ATTACKER}:{port}", "Origin": f"http://{ATTACKER}:{port}",
                "Content-Type": "application/json"})
            response = conn.getresponse()
            assert_refused(response.status, json.loads(response.read()), f"{ATTACKER}:{port}")
            conn.close()
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            with pytest.raises(InvalidStatus) as denied:
                connect(f"ws://{ATTACKER}:{port}/graphql", sock=sock,
                        origin=f"http://{ATTACKER}:{port}",  # type: ignore[arg-type]
                        subprotocols=["graphql-transport-ws"])  # type: ignore[list-item]
            assert denied.value.response.status_code == 421
            assert_refused(421, json.loads(denied.value.response.body or b"{}"),
                           f"{ATTACKER}:{port}")
            with connect(f"ws://127.0.0.1:{port}/graphql",
                         subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
                ws.send(json.dumps({"type": "connection_init"}))
                assert json.loads(ws.recv(timeout=10))["type"] == "connection_ack"
        assert mongo[database]["production"].find_one({"_id": "pwned"}) is None
    finally:
        mongo.drop_database(database)
        mongo.close()
