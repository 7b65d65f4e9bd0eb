"""Security, GROQ and deploys: one viewer query or one large
deploy must not freeze the process, and a query nobody waits for must stop.

A real uvicorn server on 127.0.0.1 in this test's event loop: ``/healthz`` is polled
over real sockets while the attack runs, and a raw socket (or a websocket operation)
hangs up mid-query.
Bounds on time are generous (answers within 5 s); measured figures are printed and
kept under ``test-artifacts/reliability/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from pymongo import MongoClient
from websockets.asyncio.client import connect as ws_connect
from websockets.typing import Subprotocol

from kinflow.core.context import Limits
from kinflow.groq import Budget
from kinflow.http.app import create_app
from kinflow.settings import Settings
from tests.reliability.figures import record
from tests.reliability.health_probe import HealthProbe
from tests.support import free_port

pytestmark = pytest.mark.lake
VIEWER = "viewer-token-groq-lane"
ADMIN = "admin-token-groq-lane"
TOKENS = f"{VIEWER}=vera:viewer,{ADMIN}=ada:admin"
NESTED = 'count(*[_type=="atkrow" && n < 4 && count(*[count(*[n == ^.n]) > 0]) > 0])'
GROQ = "query($q: String!) { groq(query: $q) }"
DEPLOY = ("mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) "
          "{ definitions { name version status } } }")
HEALTHZ_BOUND = 5.0  # seconds: generous; before the fix /healthz waited for the whole attack


@pytest.fixture
def database(lake_uri: str) -> Iterator[str]:
    name = f"groq_{uuid.uuid4().hex[:12]}"
    yield name
    client: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    client.drop_database(name)
    client.close()


@contextlib.asynccontextmanager
async def listening(lake_uri: str, database: str, **overrides: Any) -> AsyncIterator[str]:
    """The app behind a real uvicorn server on 127.0.0.1; stopped on exit (``overrides`` may
    replace the tokens too)."""
    settings = Settings(mongodb_uri=lake_uri, database=database, operation_timeout=20.0,
                        worker=False, **{"api_tokens": TOKENS, **overrides})
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                                          log_level="warning", timeout_graceful_shutdown=10))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("the server did not start")
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 60)


def seed_rows(lake_uri: str, database: str, count: int = 2030) -> None:
    client: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    client[database]["production"].insert_many(
        [{"_id": f"atk-{i:05d}", "_type": "atkrow", "n": i % 7} for i in range(count)])
    client.close()


async def post(base: str, token: str, query: str, variables: dict[str, Any]
               ) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=120.0) as http:
        response = await http.post(f"{base}/graphql", json={"query": query,
                                                            "variables": variables},
                                   headers={"Authorization": f"Bearer {token}"})
    body: dict[str, Any] = response.json()
    return body, time.perf_counter() - started


def error(body: dict[str, Any]) -> dict[str, Any]:
    assert body.get("errors"), body
    extensions: dict[str, Any] = body["errors"][0]["extensions"]
    return extensions


def chain(name: str, stages: int) -> dict[str, Any]:
    """A definition of ``stages`` stages in a row, ~130 bytes of JSON each."""
    out = []
    for i in range(stages):
        stage: dict[str, Any] = {"name": f"stage-{i:05d}", "title": f"Stage number {i}"}
        if i < stages - 1:
            stage["transitions"] = [{"name": "next", "to": f"stage-{i + 1:05d}",
                                     "when": "$fields.go == true"}]
        out.append(stage)
    return {"name": name, "title": name.title(), "initialStage": "stage-00000",
            "fields": [{"name": "go", "type": "boolean"}], "stages": out}


async def test_a_viewers_nested_query_is_refused_and_healthz_answers_meanwhile(
    lake_uri: str, database: str
) -> None:
    seed_rows(lake_uri, database)
    async with listening(lake_uri, database, groq_max_scanned=2_000_000,
                         groq_timeout=120) as base:
        async with HealthProbe(base) as probe:
            body, took = await post(base, VIEWER, GROQ, {"q": NESTED})
        extensions = error(body)
        assert extensions["code"] == "groq-limit-exceeded"
        assert extensions["details"]["limit"] == "documents-scanned"
        assert extensions["details"]["maxScanned"] == 2_000_000
        assert set(probe.statuses) == {200} and len(probe.latencies) >= 3
        assert probe.worst < HEALTHZ_BOUND
        record("security-groq-nested", f"nested GROQ over 2,030 documents refused after "
               f"{took:.2f} s ({extensions['details']['scanned']} elements visited); /healthz "
               f"worst {probe.worst:.3f} s over {len(probe.latencies)} polls meanwhile")


async def test_four_viewers_at_once_are_each_refused_and_healthz_still_answers(
    lake_uri: str, database: str
) -> None:
    """Evaluations share two threads, so a flood queues instead of starving the loop."""
    seed_rows(lake_uri, database)
    async with listening(lake_uri, database, groq_max_scanned=400_000,
                         groq_timeout=120) as base:
        async with HealthProbe(base) as probe:
            started = time.perf_counter()
            answers = await asyncio.gather(*[post(base, VIEWER, GROQ, {"q": NESTED})
                                             for _ in range(4)])
            took = time.perf_counter() - started
        assert [error(body)["code"] for body, _ in answers] == ["groq-limit-exceeded"] * 4
        assert set(probe.statuses) == {200} and probe.worst < HEALTHZ_BOUND
        record("security-groq-flood", f"4 nested queries at once refused within {took:.2f} s; "
               f"/healthz worst {probe.worst:.3f} s over {len(probe.latencies)} polls")


async def test_the_time_bound_refuses_a_query_with_its_figures(
    lake_uri: str, database: str
) -> None:
    seed_rows(lake_uri, database)
    async with listening(lake_uri, database, groq_max_scanned=0, groq_timeout=1) as base:
        body, took = await post(base, VIEWER, GROQ, {"q": NESTED})
        extensions = error(body)
        assert extensions["code"] == "groq-limit-exceeded"
        details = extensions["details"]
        assert details["limit"] == "time" and details["timeoutSeconds"] == 1.0
        assert details["elapsedSeconds"] >= 1.0 and details["scanned"] > 0
        ordinary, _ = await post(base, VIEWER, GROQ, {"q": 'count(*[_type == "atkrow"])'})
        assert ordinary == {"data": {"groq": 2030}}
        long_text = "[" + "1," * 400_000 + "1]"  # 800 KB: seconds of parsing, refused unread
        body, refused_in = await post(base, VIEWER, GROQ, {"q": long_text})
        assert error(body)["details"] == {"limit": "query-length", "maxLength": 100_000,
                                          "length": len(long_text)}
        print(f"800 KB query refused in {refused_in:.2f} s")
        print(f"time bound: refused after {took:.2f} s")


@pytest.fixture
def budgets(monkeypatch: pytest.MonkeyPatch) -> list[Budget]:
    """Every GROQ budget handed out while the test runs, in order."""
    found: list[Budget] = []
    original = Limits.groq_budget

    def recording(self: Limits, **kwargs: Any) -> Budget:
        budget = original(self, **kwargs)
        found.append(budget)
        return budget

    monkeypatch.setattr(Limits, "groq_budget", recording)
    return found


async def under_way(budgets: list[Budget]) -> Budget:
    """The first budget, once its query has visited 20,000 elements (within a minute)."""
    for _ in range(1200):
        if budgets and budgets[0].scanned > 20_000:
            break
        await asyncio.sleep(0.05)
    assert budgets and budgets[0].scanned > 20_000, "the query never started"
    return budgets[0]


async def until_stopped(budget: Budget) -> None:
    """Until the budget's query stopped, for at most 30 seconds."""
    for _ in range(600):
        if budget.stopped is not None:
            return
        await asyncio.sleep(0.05)


async def test_a_client_that_hangs_up_stops_the_query(
    lake_uri: str, database: str, budgets: list[Budget]
) -> None:
    seed_rows(lake_uri, database)
    # no documents-scanned bound, a far deadline: only the hang-up can stop this early
    async with listening(lake_uri, database, groq_max_scanned=0, groq_timeout=300) as base:
        port = int(base.rsplit(":", 1)[1])
        payload = json.dumps({"query": GROQ, "variables": {"q": NESTED}}).encode()
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\n"
                     b"Authorization: Bearer " + VIEWER.encode() + b"\r\n"
                     b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
        await writer.drain()
        budget = await under_way(budgets)
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
        await until_stopped(budget)
        assert budget.cancelled
        assert budget.stopped == "cancelled"  # not the deadline, not a scan limit
        assert budget.scanned < 2030 ** 3 // 10
        async with httpx.AsyncClient(timeout=10.0) as http:
            assert (await http.get(f"{base}/healthz")).status_code == 200
        record("security-groq-hangup", f"hang-up: the query stopped after {budget.scanned} "
               "elements visited (cancelled)")


@pytest.mark.parametrize("leave", ["complete", "close"])
async def test_a_websocket_operation_completed_or_dropped_stops_the_query(
    lake_uri: str, database: str, budgets: list[Budget], leave: str
) -> None:
    seed_rows(lake_uri, database)
    async with listening(lake_uri, database, groq_max_scanned=0, groq_timeout=300) as base:
        url = base.replace("http://", "ws://") + "/graphql"
        async with ws_connect(url, subprotocols=[Subprotocol("graphql-transport-ws")],
                              open_timeout=20) as ws:
            await ws.send(json.dumps({"type": "connection_init",
                                      "payload": {"authorization": f"Bearer {VIEWER}"}}))
            assert json.loads(await ws.recv())["type"] == "connection_ack"
            await ws.send(json.dumps({"id": "q1", "type": "subscribe", "payload": {
                "query": GROQ, "variables": {"q": NESTED}}}))
            budget = await under_way(budgets)
            if leave == "complete":
                await ws.send(json.dumps({"id": "q1", "type": "complete"}))
            else:
                await ws.close()
            await until_stopped(budget)
        assert budget.cancelled and budget.stopped == "cancelled"
        print(f"websocket {leave}: stopped after {budget.scanned} elements visited")


async def test_a_large_deploy_leaves_healthz_answering_and_oversized_ones_are_refused(
    lake_uri: str, database: str
) -> None:
    large = chain("large", 6_000)  # ~0.8 MB: under the limit below
    huge = chain("huge", 12_000)  # ~1.6 MB: the finding's size, over it
    async with listening(lake_uri, database, max_definition_bytes=1_200_000) as base:
        body, refused_in = await post(base, ADMIN, DEPLOY, {"d": [huge]})
        extensions = error(body)
        assert extensions["code"] == "definition-too-large"
        assert extensions["details"]["limit"] == 1_200_000
        [entry] = extensions["details"]["definitions"]
        assert entry["definition"] == "huge" and entry["bytes"] > 1_200_000
        async with HealthProbe(base) as probe:
            body, took = await post(base, ADMIN, DEPLOY, {"d": [large]})
        assert body == {"data": {"deployDefinitions": {"definitions": [
            {"name": "large", "version": 1, "status": "created"}]}}}, body
        assert set(probe.statuses) == {200} and probe.worst < HEALTHZ_BOUND
    client: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    names = client[database]["production"].distinct("name", {"_type": "kinflow.definition"})
    client.close()
    assert names == ["large"]  # the refused one wrote nothing
    record("security-groq-deploy", f"6,000-stage deploy {took:.2f} s, /healthz worst "
           f"{probe.worst:.3f} s over {len(probe.latencies)} polls; 12,000-stage definition "
           f"refused in {refused_in:.2f} s")
