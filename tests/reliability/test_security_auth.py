"""Security, authentication: a token bypass and token guessing.

The bypass: the GraphiQL exemption matched the raw bytes ``query=`` while
strawberry decodes parameter names, so ``GET /graphql?%71uery=...`` with
``Accept: text/html`` read the whole lake without a token. Here every
spelling, duplicate, method and content type of an operation is replayed
without a token and must get 401 and no data, and a bypass of the first
check (forced in a test) must still execute nothing. Guessing: tokens under
16 characters are refused at start-up, and wrong tokens are throttled per
client address (HTTP and websocket ``connection_init`` alike).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from pymongo import MongoClient
from starlette.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect

import kinflow.http.app
import kinflow.http.tokens
from kinflow.engine import Actor
from kinflow.errors import ConfigurationError
from kinflow.http.app import create_app
from kinflow.http.throttle import FailureThrottle, TooManyAttempts, client_key
from kinflow.http.tokens import MIN_TOKEN_LENGTH, TokenTable, load_tokens
from kinflow.settings import Settings
from tests.reliability.figures import record

pytestmark = pytest.mark.lake

VIEW, OPERATOR = "view-token-for-tests", "op-token-for-tests"
TOKENS = f"{VIEW}=vera:viewer,{OPERATOR}=otto:operator"
MARKER = "marker-7f3a9c"  # the title of a document only a token holder may read
READ = '{ groq(query: "*[_id == \\"secret-1\\"][0].title") }'
INTROSPECT = "{ __schema { queryType { name } } }"


class PeerFromHeader:
    """Test-only ASGI wrapper: ``X-Test-Peer`` sets the client address, as if from many hosts."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            for key, value in scope.get("headers") or []:
                if key == b"x-test-peer":
                    scope = {**scope, "client": (value.decode(), 50000)}
        await self.app(scope, receive, send)


def serve(lake_uri: str, database: str, **overrides: Any) -> TestClient:
    settings = Settings(mongodb_uri=lake_uri, database=database, operation_timeout=20.0,
                        worker=False, api_tokens=TOKENS, **overrides)  # fmt: skip
    return TestClient(PeerFromHeader(create_app(settings)))


@pytest.fixture
def database(lake_uri: str) -> Iterator[str]:
    name = f"auth_{uuid.uuid4().hex[:12]}"
    yield name
    mongo: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    mongo.drop_database(name)
    mongo.close()


@pytest.fixture
def http(lake_uri: str, database: str) -> Iterator[TestClient]:
    """The app with tokens and one secret document written by the operator."""
    with serve(lake_uri, database) as client:
        seeded = client.post("/graphql", headers=bearer(OPERATOR), json={
            "query": 'mutation { putDocument(document: {_id: "secret-1", _type: "note", '
                     f'title: "{MARKER}"}}) }}'})  # fmt: skip
        assert seeded.status_code == 200 and not seeded.json().get("errors"), seeded.text
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _encoded(name: str) -> str:
    """Every character of ``name`` percent-encoded."""
    return "".join(f"%{byte:02X}" for byte in name.encode())


def attacks() -> list[tuple[str, dict[str, Any]]]:
    """Requests that would run READ (or introspection) if the token check let them through."""
    q, intro = quote(READ), quote(INTROSPECT)
    html = {"Accept": "text/html"}
    gets = {
        "plain": f"query={q}",
        "q-encoded": f"%71uery={q}",
        "Q-encoded": f"%51uery={q}",
        "all-encoded": f"{_encoded('query')}={q}",
        "middle-encoded": f"qu%65ry={q}",
        "Query": f"Query={q}",
        "QUERY": f"QUERY={q}",
        "empty-then-query": f"query=&query={q}",
        "query-then-empty": f"query={q}&query=",
        "encoded-then-plain": f"%71uery={q}&query={q}",
        "after-other-param": f"x=1&%71uery={q}",
        "plus-after-name": f"query+={q}",
        "introspection-encoded": f"%71uery={intro}",
        "operation-name-only": "operationName=x",
        "variables-only": "variables=%7B%7D",
    }
    cases: list[tuple[str, dict[str, Any]]] = []
    for name, query_string in gets.items():
        for accept in ({**html}, {"Accept": "*/*"}, {"Accept": "application/json"}, {}):
            cases.append((f"GET {name} {accept}", {
                "method": "GET", "url": f"/graphql?{query_string}", "headers": accept}))
    body = json.dumps({"query": READ})
    posts: dict[str, tuple[str, bytes | str]] = {
        "json": ("application/json", body),
        "json-charset": ("application/json; charset=utf-8", body),
        "json-batch": ("application/json", json.dumps([{"query": READ}])),
        "graphql": ("application/graphql", READ),
        "form": ("application/x-www-form-urlencoded", f"query={q}"),
        "form-encoded-name": ("application/x-www-form-urlencoded", f"%71uery={q}"),
        "text": ("text/plain", body),
        "none": ("", body),
    }
    for name, (content_type, content) in posts.items():
        headers = {"Content-Type": content_type} if content_type else {}
        for accept in ({}, html):
            cases.append((f"POST {name} {accept}", {
                "method": "POST", "url": "/graphql", "headers": {**headers, **accept},
                "content": content}))
    cases.append(("POST query-string html", {
        "method": "POST", "url": f"/graphql?%71uery={q}", "headers": html}))
    boundary = "kinflowboundary"
    multipart = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"operations\"\r\n\r\n"
                 f"{body}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"map\"\r\n\r\n"
                 f"{{}}\r\n--{boundary}--\r\n")  # fmt: skip
    cases.append(("POST multipart", {
        "method": "POST", "url": "/graphql", "content": multipart,
        "headers": {"Content-Type": f"multipart/form-data; boundary={boundary}"}}))
    for name, headers in {
        "empty bearer": {"Authorization": "Bearer "},
        "basic": {"Authorization": "Basic dmVyYTp4"},
    }.items():
        cases.append((f"GET {name}", {"method": "GET", "url": f"/graphql?%71uery={q}",
                                      "headers": {**html, **headers}}))  # fmt: skip
    return cases


def _leaked(response: httpx.Response) -> bool:
    return MARKER in response.text or "queryType" in response.text


def test_encodings_of_an_operation_never_pass_the_token_check(http: TestClient) -> None:
    """Finding 1 replayed: 401 and no data for every spelling, method and content type."""
    cases = attacks()
    for name, request in cases:
        response = http.request(**request)
        assert response.status_code == 401, (name, response.status_code, response.text[:200])
        body = response.json()
        assert body["data"] is None and not _leaked(response), name
        assert body["errors"][0]["extensions"]["code"] == "unauthenticated", name
    # The same attacks carry a real operation: with a token, the encoded GET reads the secret.
    read = http.get(f"/graphql?%71uery={quote(READ)}",
                    headers={"Accept": "text/html", **bearer(VIEW)})  # fmt: skip
    assert read.status_code == 200 and read.json()["data"]["groq"] == MARKER
    record("security-auth-encodings", f"security/auth: {len(cases)} encodings of an operation "
                                      "without a token: every one 401, no data")


def test_the_graphiql_page_loads_without_a_token(http: TestClient) -> None:
    for url in ("/graphql", "/graphql?", "/graphql?theme=dark"):
        page = http.get(url, headers={"Accept": "text/html,application/xhtml+xml"})
        assert page.status_code == 200, url
        assert page.headers["content-type"].startswith("text/html")
        assert not _leaked(page)


def test_two_authorization_headers_are_refused(http: TestClient) -> None:
    headers = [("Authorization", "Bearer wrong-token-guess-1"), ("Authorization", f"Bearer {VIEW}"),
               ("Content-Type", "application/json")]  # fmt: skip
    response = http.post("/graphql", headers=headers, content=json.dumps({"query": READ}))
    assert response.status_code == 401 and not _leaked(response)


def test_the_view_executes_nothing_even_past_a_broken_check(
    http: TestClient, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Defence in depth: with the IDE check forced open, no attack reaches data either."""
    monkeypatch.setattr(kinflow.http.app, "ide_page_request", lambda scope: True)
    for name, request in attacks():
        response = http.request(**request)
        assert not _leaked(response), name
        if response.headers.get("content-type", "").startswith("application/json"):
            assert response.json().get("data") is None, name
    response = http.get(f"/graphql?query={quote(READ)}", headers={"Accept": "text/html"})
    assert response.status_code == 401 and not _leaked(response)


def test_websockets_stay_anonymous_until_connection_init(http: TestClient) -> None:
    """The legacy protocol refuses ``start`` before an acknowledged ``connection_init``."""
    with http.websocket_connect("/graphql", subprotocols=["graphql-ws"]) as ws:
        ws.send_json({"type": "start", "id": "1", "payload": {"query": READ}})
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 4401
    with http.websocket_connect("/graphql", subprotocols=["graphql-ws"]) as ws:
        ws.send_json({"type": "connection_init", "payload": {"token": "not-a-valid-token"}})
        ws.send_json({"type": "start", "id": "1", "payload": {"query": READ}})
        message = ws.receive_json()
        assert message["type"] == "connection_error" and MARKER not in json.dumps(message)


# -- tokens ---------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [
    "short=eve:admin",
    "x" * (MIN_TOKEN_LENGTH - 1) + "=eve:admin",
    '{"tiny": {"id": "eve", "roles": ["viewer"]}}',
    f"{VIEW}=vera:viewer,a=amy:admin",
])  # fmt: skip
def test_short_tokens_are_refused_at_start_up(raw: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        create_app(Settings(api_tokens=raw, _env_file=None))  # type: ignore[call-arg]
    assert refused.value.details["minimum"] == MIN_TOKEN_LENGTH
    assert "16" in refused.value.message
    secret = raw.split("=")[0].strip('{"') if "=" in raw else "tiny"
    if secret != VIEW:
        assert secret not in refused.value.message  # the secret itself is never echoed


def test_short_tokens_in_the_tokens_file_are_refused(tmp_path: Any) -> None:
    path = tmp_path / "tokens.json"
    path.write_text('{"abc": {"id": "eve", "roles": ["admin"]}}')
    with pytest.raises(ConfigurationError):
        load_tokens(Settings(api_tokens_file=path, _env_file=None))  # type: ignore[call-arg]
    path.write_text('{"%s": {"id": "eve", "roles": ["admin"]}}' % ("k" * MIN_TOKEN_LENGTH))
    assert load_tokens(Settings(api_tokens_file=path, _env_file=None)).enabled  # type: ignore[call-arg]


def test_every_token_is_compared_whatever_the_guess(monkeypatch: pytest.MonkeyPatch) -> None:
    """No early exit and no lookup keyed on the secret: one digest comparison per token."""
    tokens = {f"token-number-{n:04d}": Actor.person(f"p{n}", "viewer") for n in range(5)}
    table = TokenTable(tokens)
    compared: list[tuple[int, int]] = []
    real = kinflow.http.tokens.hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(kinflow.http.tokens.hmac, "compare_digest", counting)
    assert table.lookup("token-number-0000").id == "p0"
    with pytest.raises(kinflow.http.tokens.Unauthenticated):
        table.lookup("x")
    with pytest.raises(kinflow.http.tokens.Unauthenticated):
        table.lookup("token-number-0004" * 50)
    assert len(compared) == 15 and {pair for pair in compared} == {(32, 32)}


# -- throttling -----------------------------------------------------------------------


def _wrong(client: TestClient, peer: str, n: int) -> httpx.Response:
    return client.post("/graphql", json={"query": READ},
                       headers={"X-Test-Peer": peer, **bearer(f"guess-{n:012d}")})  # fmt: skip


def _read(client: TestClient, peer: str) -> httpx.Response:
    return client.post("/graphql", json={"query": READ},
                       headers={"X-Test-Peer": peer, **bearer(VIEW)})  # fmt: skip


def test_wrong_tokens_are_throttled_per_address(lake_uri: str, database: str) -> None:
    """Finding 10 replayed: a burst of guesses gets 429 after the limit, not 1,128 tries/s."""
    with serve(lake_uri, database, auth_max_failures=5, auth_failure_window=600) as client:
        statuses = [_wrong(client, "198.51.100.7", n).status_code for n in range(40)]
        assert statuses[:5] == [401] * 5 and set(statuses[5:]) == {429}
        limited = _wrong(client, "198.51.100.7", 99)
        error = limited.json()["errors"][0]
        assert error["extensions"]["code"] == "too-many-attempts"
        retry_after = error["extensions"]["details"]["retryAfter"]
        assert 0 < retry_after <= 600 and limited.headers["Retry-After"] == str(retry_after)
        # While locked out even a valid token is refused: the answer is no oracle.
        assert _read(client, "198.51.100.7").status_code == 429
        # Another address is untouched, and its valid token reads.
        other = _read(client, "198.51.100.8")
        assert other.status_code == 200 and not other.json().get("errors")
        assert _wrong(client, "198.51.100.8", 0).status_code == 401
        # Requests without a token test no guess and are not counted.
        for _ in range(10):
            assert client.post("/graphql", json={"query": READ},
                               headers={"X-Test-Peer": "198.51.100.9"}).status_code == 401
        assert _read(client, "198.51.100.9").status_code == 200
        # The GraphiQL page still loads from the locked-out address.
        page = client.get("/graphql", headers={"Accept": "text/html",
                                               "X-Test-Peer": "198.51.100.7"})  # fmt: skip
        assert page.status_code == 200
    record("security-auth-throttle", f"security/auth: 40 wrong tokens from one address -> "
                                     f"{statuses.count(401)} answered 401, "
                                     f"{statuses.count(429)} refused 429 (limit 5 per window)")


def test_a_valid_token_does_not_reset_the_count(lake_uri: str, database: str) -> None:
    """A viewer cannot interleave good requests to keep guessing an admin's token."""
    with serve(lake_uri, database, auth_max_failures=4, auth_failure_window=600) as client:
        peer = "192.0.2.44"
        for n in range(3):
            assert _wrong(client, peer, n).status_code == 401
            assert _read(client, peer).status_code == 200
        assert _wrong(client, peer, 3).status_code == 401
        assert _wrong(client, peer, 4).status_code == 429


def test_websocket_connection_init_failures_count(lake_uri: str, database: str) -> None:
    with serve(lake_uri, database, auth_max_failures=3, auth_failure_window=600) as client:
        peer = {"X-Test-Peer": "203.0.113.20"}
        for n in range(3):
            with client.websocket_connect("/graphql", subprotocols=["graphql-ws"],
                                          headers={**peer}) as ws:  # fmt: skip
                ws.send_json({"type": "connection_init", "payload": {"token": f"guess-{n:012d}"}})
                refused = ws.receive_json()
                assert refused["payload"]["extensions"]["code"] == "unauthenticated"
        with client.websocket_connect("/graphql", subprotocols=["graphql-ws"],
                                      headers={**peer}) as ws:  # fmt: skip
            ws.send_json({"type": "connection_init", "payload": {"token": VIEW}})
            refused = ws.receive_json()
            assert refused["type"] == "connection_error"
            assert refused["payload"]["extensions"]["code"] == "too-many-attempts"
            assert refused["payload"]["extensions"]["details"]["retryAfter"] > 0
        with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"],
                                      headers={**peer}) as ws:  # fmt: skip
            ws.send_json({"type": "connection_init", "payload": {"token": VIEW}})
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_json()
            assert closed.value.code == 4403
        assert _read(client, "203.0.113.20").status_code == 429  # HTTP shares the count
        with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"],
                                      headers={"X-Test-Peer": "203.0.113.21"}) as ws:  # fmt: skip
            ws.send_json({"type": "connection_init", "payload": {"token": VIEW}})
            assert ws.receive_json()["type"] == "connection_ack"


def test_the_lockout_ends_with_its_window(lake_uri: str, database: str) -> None:
    with serve(lake_uri, database, auth_max_failures=2, auth_failure_window=1.0) as client:
        peer = "198.51.100.77"
        for n in range(2):
            assert _wrong(client, peer, n).status_code == 401
        assert _read(client, peer).status_code == 429
        locked = time.monotonic()
        while _read(client, peer).status_code == 429:
            assert time.monotonic() - locked < 10, "the lockout outlived its window"
            time.sleep(0.1)
        waited = time.monotonic() - locked
    record("security-auth-window", f"security/auth: a 1 s lockout lifted after {waited:.2f} s")


def test_the_failure_table_is_bounded() -> None:
    now = [0.0]
    throttle = FailureThrottle(limit=3, window=60, capacity=100, clock=lambda: now[0])
    for n in range(5000):
        throttle.failed(f"10.{n // 65536}.{n // 256 % 256}.{n % 256}")
        now[0] += 0.001
    assert len(throttle) == 100
    for _ in range(3):
        throttle.failed("10.250.0.1")
    with pytest.raises(TooManyAttempts) as refused:
        throttle.check("10.250.0.1")
    assert refused.value.details["retryAfter"] == 60
    now[0] += 61
    throttle.check("10.250.0.1")  # the window ended
    throttle.failed("10.250.0.2")
    assert len(throttle) == 1  # expired windows went first
    # IPv6 counts per /64; an IPv4-mapped address as its IPv4 address.
    assert client_key("2001:db8::1") == client_key("2001:db8::ffff:2") == "2001:db8::/64"
    assert client_key("::ffff:192.0.2.1") == "192.0.2.1" and client_key(None) == "unknown"
    off = FailureThrottle(limit=0, window=60, capacity=10)
    for _ in range(100):
        off.failed("10.0.0.1")
    off.check("10.0.0.1")


def test_every_loopback_alias_shares_one_bucket() -> None:
    """A local caller can bind any 127.x.y.z: each alias a bucket of its own was no limit."""
    throttle = FailureThrottle(limit=3, window=60, capacity=100)
    for host in ("127.0.0.1", "127.0.0.2", "127.9.8.7"):
        throttle.failed(host)
    for host in ("127.200.1.1", "::1", "::ffff:127.0.0.5"):
        with pytest.raises(TooManyAttempts):
            throttle.check(host)
    throttle.check("192.0.2.1")  # another client is not affected
    assert client_key("127.0.0.1") == client_key("::1") == "loopback"
