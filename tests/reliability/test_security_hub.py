"""Security: a viewer must not exhaust the lake's connections.

The attack: a viewer subscribes to ``documentChanged`` with ~120 invented
dataset names; each used to create a collection and a change stream that was
never closed, until the pool ran dry, ``/healthz`` answered 503 and SIGTERM
waited minutes. Replayed here against a real server process: invented names
are refused (``dataset-not-found``) and create nothing, streams stay under the
per-process cap (``too-many-streams`` past it), a stream is released when its
last subscriber leaves, and SIGTERM with open subscriptions stops promptly.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient
from starlette.testclient import TestClient
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from kinflow.errors import (
    ConfigurationError,
    DatasetNotFound,
    LakeUnavailable,
    TooManyStreams,
)
from kinflow.http.app import create_app
from kinflow.schema.hubs import Hubs
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.datasets import Datasets, parse_dataset_list
from tests.reliability.figures import record
from tests.support import free_port, running

EXTERNAL_LAKE = bool(os.environ.get("KINFLOW_TEST_MONGODB_URI"))
pytestmark = [
    pytest.mark.lake,
    pytest.mark.skipif(EXTERNAL_LAKE, reason="servers run against the session's embedded lake"),
]
VIEWER = "viewer-token-hub-0123456789"
OPERATOR = "operator-token-hub-0123456789"
ADMIN = "admin-token-hub-0123456789ab"
TOKENS = f"{VIEWER}=vera:viewer,{OPERATOR}=otto:operator,{ADMIN}=ada:admin"
SHELVES = [f"shelf-{n}" for n in range(1, 6)]
DOC_CHANGED = "subscription($ds: String) { documentChanged(id: \"a-1\", dataset: $ds) }"


# -- a real server and its clients ------------------------------------------------------------


@contextmanager
def lake_database(lake_uri: str) -> Iterator[tuple[MongoClient[dict[str, Any]], str]]:
    database = f"hub_{uuid.uuid4().hex[:12]}"
    mongo: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    try:
        yield mongo, database
    finally:
        mongo.drop_database(database)
        mongo.close()


@contextmanager
def server(lake_uri: str, database: str, log: Path, **settings: str
           ) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:  # fmt: skip
    """``kinflow serve`` on 127.0.0.1 over the session's lake; its output goes to ``log``."""
    port = free_port()
    env = {**os.environ, "KINFLOW_MONGODB_URI": lake_uri, "KINFLOW_DATABASE": database,
           "KINFLOW_PORT": str(port), "KINFLOW_API_TOKENS": TOKENS,
           "KINFLOW_OPERATION_TIMEOUT": "20", **settings}  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    with log.open("wb") as out, running([sys.executable, "-m", "kinflow.cli", "serve"], env=env,
                                        health_url=f"{base}/healthz", output=out) as process:
        yield base, process


def health(base: str, timeout: float = 5.0) -> tuple[int, dict[str, Any], float]:
    began = time.monotonic()
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=timeout) as response:
            return response.status, json.loads(response.read()), time.monotonic() - began
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}"), time.monotonic() - began


def post(base: str, query: str, token: str, variables: dict[str, Any] | None = None,
         timeout: float = 20.0) -> dict[str, Any]:  # fmt: skip
    request = urllib.request.Request(
        f"{base}/graphql", data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body: dict[str, Any] = json.loads(response.read())
        return body


@contextmanager
def socket(base: str, token: str) -> Iterator[ClientConnection]:
    url = base.replace("http://", "ws://") + "/graphql"
    with connect(url, subprotocols=["graphql-transport-ws"], open_timeout=20) as ws:  # type: ignore[list-item]
        ws.send(json.dumps({"type": "connection_init",
                            "payload": {"authorization": f"Bearer {token}"}}))  # fmt: skip
        assert json.loads(ws.recv(timeout=20))["type"] == "connection_ack"
        yield ws


def subscribe(ws: ClientConnection, op: str, query: str, variables: dict[str, Any]) -> None:
    ws.send(json.dumps({"id": op, "type": "subscribe",
                        "payload": {"query": query, "variables": variables}}))  # fmt: skip


def outcomes(ws: ClientConnection, ops: set[str], timeout: float = 60.0
             ) -> dict[str, tuple[str, dict[str, Any]]]:  # fmt: skip
    """The first answer to each operation: ``("data", payload)`` or ``(code, details)``."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    deadline = time.monotonic() + timeout
    while not ops <= found.keys():
        message = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
        op = message.get("id")
        if op not in ops or op in found:
            continue
        errors = (message["payload"] if message["type"] == "error"
                  else (message.get("payload") or {}).get("errors"))  # fmt: skip
        if errors:
            ext = errors[0].get("extensions") or {}
            found[op] = (ext.get("code", "?"), ext.get("details") or {})
        elif message["type"] == "next":
            found[op] = ("data", message["payload"]["data"])
    return found


def wait_for(predicate: Any, base: str, timeout: float = 30.0) -> dict[str, Any]:
    """Poll /healthz until ``predicate(body)``; the body it last saw."""
    deadline = time.monotonic() + timeout
    while True:
        _, body, _ = health(base)
        if predicate(body) or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


def collections(mongo: MongoClient[dict[str, Any]], database: str) -> set[str]:
    return set(mongo[database].list_collection_names())


# -- the attack ---------------------------------------------------------------------------------


def test_invented_datasets_are_refused_and_streams_stay_capped(
    lake_uri: str, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    with lake_database(lake_uri) as (mongo, database), server(
        lake_uri, database, log, KINFLOW_WORKER="false",
        KINFLOW_EXTRA_DATASETS=",".join(SHELVES), KINFLOW_MAX_HUB_STREAMS="4",
    ) as (base, process):  # fmt: skip
        before = collections(mongo, database)
        refusals: dict[str, tuple[str, dict[str, Any]]] = {}
        failures: list[BaseException] = []
        enough = threading.Event()  # the main thread has seen enough writes under attack
        rounds = [0, 0, 0]

        def attack(wave: int) -> None:
            """40 invented names per round, again and again until the writer is done."""
            try:
                with socket(base, VIEWER) as ws:
                    while rounds[wave] < 2 or not enough.is_set():
                        names = {f"{wave}-{rounds[wave]}-{n}": f"ds-{wave * 40 + n}"
                                 for n in range(40)}  # fmt: skip
                        for op, name in names.items():
                            subscribe(ws, op, DOC_CHANGED, {"ds": name})
                        for op, outcome in outcomes(ws, set(names)).items():
                            refusals[names[op]] = outcome
                        rounds[wave] += 1
                        time.sleep(0.2)  # a flood, not a CPU hog on a shared test machine
            except BaseException as exc:  # reported by the main thread
                failures.append(exc)

        attackers = [threading.Thread(target=attack, args=(w,)) for w in range(3)]
        for thread in attackers:
            thread.start()
        health_seen: list[tuple[int, float]] = []
        put_seen: list[tuple[bool, float]] = []
        peak_streams = 0
        while any(t.is_alive() for t in attackers) or not put_seen:
            status, body, took = health(base)
            health_seen.append((status, took))
            peak_streams = max(peak_streams, body.get("hub", {}).get("streams", -1))
            began = time.monotonic()
            try:
                put = post(base, "mutation($d: JSON!) { putDocument(document: $d) }", OPERATOR,
                           {"d": {"_id": f"note-{len(put_seen)}", "_type": "note"}})  # fmt: skip
                put_seen.append((not put.get("errors"), time.monotonic() - began))
            except OSError:  # a timeout: the write waited for the pool
                put_seen.append((False, time.monotonic() - began))
            if len(put_seen) >= 20:
                enough.set()
        for thread in attackers:
            thread.join()
        worst_health = max(took for _, took in health_seen)
        worst_put = max(took for _, took in put_seen)
        created = collections(mongo, database) - before
        record("security-hub-attack",
               f"120 invented datasets as a viewer, {sum(rounds) * 40} subscriptions: "
               f"{len(refusals)} names answered "
               f"({sorted({c for c, _ in refusals.values()})}), {len(created)} collections "
               f"created, peak streams {peak_streams}; /healthz worst "
               f"{worst_health * 1000:.0f} ms (statuses {sorted({s for s, _ in health_seen})}), "
               f"putDocument worst {worst_put * 1000:.0f} ms over {len(put_seen)} writes")

        assert not failures, failures
        assert len(refusals) == 120
        assert {code for code, _ in refusals.values()} == {"dataset-not-found"}
        assert all(details["dataset"] == name for name, (_, details) in refusals.items())
        assert created == set()
        assert peak_streams == 1
        assert {status for status, _ in health_seen} == {200} and worst_health < 5.0
        assert all(ok for ok, _ in put_seen) and worst_put < 10.0

        # Real datasets past the cap: default + 3 streams, the other two refused.
        assert before >= {"production", *SHELVES}  # configured datasets exist from start-up
        with socket(base, VIEWER) as ws:
            for shelf in SHELVES:
                subscribe(ws, shelf, DOC_CHANGED, {"ds": shelf})
            answered = outcomes(ws, set(SHELVES))
            served = sorted(s for s, (kind, _) in answered.items() if kind == "data")
            capped = {s: d for s, (kind, d) in answered.items() if kind == "too-many-streams"}
            assert len(served) == 3 and len(capped) == 2, answered
            assert all(d["limit"] == 4 for d in capped.values())
            status, body, took = health(base)
            assert status == 200 and body["hub"]["streams"] == 4, took
            put = post(base, "mutation { putDocument(document: {_id: \"a-1\", _type: \"n\"}, "
                             f"dataset: \"{served[0]}\") }}", OPERATOR)  # fmt: skip
            assert not put.get("errors"), put
            for shelf in served:
                ws.send(json.dumps({"id": shelf, "type": "complete"}))
            after = wait_for(lambda b: b["hub"]["streams"] == 1, base)
            assert after["hub"]["streams"] == 1, after  # released with their subscribers

        began = time.monotonic()  # and the server still stops at once
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        assert time.monotonic() - began < 15.0, log.read_text(errors="replace")[-3000:]


# -- a real second dataset, in process (the hub's own counts) ------------------------------------


@pytest.fixture
def app(lake_uri: str) -> Iterator[tuple[TestClient, MongoClient[dict[str, Any]], str]]:
    with lake_database(lake_uri) as (mongo, database):
        mongo[database].create_collection("legacy")  # exists in the lake, not configured
        settings = Settings(mongodb_uri=lake_uri, database=database, operation_timeout=20.0,
                            worker=False, api_tokens=TOKENS, extra_datasets="archive",
                            max_hub_streams=3)  # fmt: skip
        with TestClient(create_app(settings)) as http:
            yield http, mongo, database


def gql(http: TestClient, query: str, token: str) -> dict[str, Any]:
    response = http.post("/graphql", json={"query": query},
                         headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert response.status_code < 500, response.text
    body: dict[str, Any] = response.json()
    return body


def code(body: dict[str, Any]) -> str:
    assert body.get("errors"), body
    found: str = body["errors"][0]["extensions"]["code"]
    return found


class Ws:
    """A graphql-transport-ws client over the TestClient."""

    def __init__(self, http: TestClient, ws: Any) -> None:
        self.http, self.ws = http, ws
        self.waiting: list[dict[str, Any]] = []  # messages of other operations, in order

    def send(self, message: dict[str, Any]) -> None:
        self.ws.send_json(message)

    def next(self, op: str) -> dict[str, Any]:
        for message in self.waiting:
            if message.get("id") == op:
                self.waiting.remove(message)
                return message
        while True:
            received: dict[str, Any] = self.ws.receive_json()
            if received.get("id") == op:
                return received
            self.waiting.append(received)

    def streams_settle(self, count: int) -> int:
        """Ping until the hubs hold ``count`` streams (a closing stream counts until closed)."""
        hubs = self.http.app.state.hubs  # type: ignore[attr-defined]
        for _ in range(5000):
            if hubs.stream_count() == count:
                break
            self.send({"type": "ping"})
            while (message := self.ws.receive_json()) != {"type": "pong"}:
                self.waiting.append(message)
        found: int = hubs.stream_count()
        return found


@contextmanager
def ws_as(http: TestClient, token: str) -> Iterator[Ws]:
    with http.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
        ws.send_json({"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}})
        assert ws.receive_json()["type"] == "connection_ack"
        yield Ws(http, ws)


def test_a_second_dataset_is_watched_while_subscribed_and_released_after(
    app: tuple[TestClient, MongoClient[dict[str, Any]], str],
) -> None:
    http, _, _ = app
    hubs = http.app.state.hubs  # type: ignore[attr-defined]
    assert hubs.stream_count() == 1
    with ws_as(http, VIEWER) as ws:
        for op, dataset in (("1", "archive"), ("2", "archive"), ("3", "legacy")):
            ws.send({"id": op, "type": "subscribe",
                     "payload": {"query": DOC_CHANGED, "variables": {"ds": dataset}}})
            assert ws.next(op)["payload"]["data"] == {"documentChanged": None}
        assert hubs.stream_count() == 3  # two subscribers share the archive's stream
        assert hubs.datasets_watched() == ["archive", "legacy", "production"]

        refused = {"id": "4", "type": "subscribe",  # a third dataset would pass the cap (3)
                   "payload": {"query": DOC_CHANGED, "variables": {"ds": "fresh"}}}
        put = gql(http, 'mutation { putDocument(document: {_id: "f", _type: "n"}, '
                        'dataset: "fresh") }', ADMIN)  # an admin's first write adds a dataset
        assert not put.get("errors"), put
        ws.send(refused)
        answer = ws.next("4")
        assert answer["payload"]["errors"][0]["extensions"]["code"] == "too-many-streams"

        put = gql(http, 'mutation { putDocument(document: {_id: "a-1", _type: "n", n: 1}, '
                        'dataset: "archive") }', OPERATOR)  # fmt: skip
        assert not put.get("errors"), put
        for op in ("1", "2"):
            assert ws.next(op)["payload"]["data"]["documentChanged"]["n"] == 1

        ws.send({"id": "1", "type": "complete"})
        assert ws.streams_settle(3) == 3  # one archive subscriber is left
        ws.send({"id": "2", "type": "complete"})
        ws.send({"id": "3", "type": "complete"})
        assert ws.streams_settle(1) == 1  # the default dataset's stream stays
        assert hubs.datasets_watched() == ["production"]
        ws.send({**refused, "id": "5"})  # room again
        assert ws.next("5")["payload"]["data"] == {"documentChanged": None}
        ws.send({"id": "5", "type": "complete"})
        assert ws.streams_settle(1) == 1
    assert hubs.subscriber_count() == 0


def test_every_dataset_argument_refuses_an_unknown_dataset_and_creates_nothing(
    app: tuple[TestClient, MongoClient[dict[str, Any]], str],
) -> None:
    http, mongo, database = app
    before = collections(mongo, database)
    assert code(gql(http, '{ groq(query: "count(*)", dataset: "nope") }', VIEWER)) \
        == "dataset-not-found"  # fmt: skip
    assert gql(http, '{ groq(query: "count(*)", dataset: "legacy") }', VIEWER)["data"] \
        == {"groq": 0}  # fmt: skip
    put = 'mutation { putDocument(document: {_id: "x", _type: "n"}, dataset: "nope") }'
    refusal = gql(http, put, OPERATOR)
    assert code(refusal) == "dataset-not-found"
    assert refusal["errors"][0]["extensions"]["details"] == {"dataset": "nope"}
    assert code(gql(http, 'mutation { deleteDocument(id: "x", dataset: "nope") }', ADMIN)) \
        == "dataset-not-found"  # fmt: skip
    assert code(gql(http, '{ groq(query: "1", dataset: "no.pe") }', VIEWER)) == "gdr-invalid"
    with ws_as(http, VIEWER) as ws:
        ws.send({"id": "1", "type": "subscribe",
                 "payload": {"query": DOC_CHANGED, "variables": {"ds": "nope"}}})
        answer = ws.next("1")
        errors = answer["payload"] if answer["type"] == "error" else answer["payload"]["errors"]
        assert errors[0]["extensions"]["code"] == "dataset-not-found"
    assert collections(mongo, database) == before
    assert http.app.state.hubs.stream_count() == 1  # type: ignore[attr-defined]


# -- shutdown ------------------------------------------------------------------------------------


def test_sigterm_with_open_subscriptions_stops_promptly(lake_uri: str, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    subscriptions = [("subscription($ds: String) { documentChanged(id: \"d\", dataset: $ds) }",
                      {"ds": ds}) for ds in ["production", *SHELVES]]  # fmt: skip
    subscriptions.append(("subscription { instancesChanged { kind } }", {}))
    with lake_database(lake_uri) as (_, database), server(
        lake_uri, database, log, KINFLOW_EXTRA_DATASETS=",".join(SHELVES),
        KINFLOW_MAX_HUB_STREAMS="8",
    ) as (base, process), socket(base, VIEWER) as one, socket(base, VIEWER) as two, \
            socket(base, OPERATOR) as three:  # fmt: skip
        sockets = [one, two, three]
        for ws in sockets:
            answering = set()  # instancesChanged over no instance sends nothing first
            for n in range(30):
                query, variables = subscriptions[n % len(subscriptions)]
                subscribe(ws, str(n), query, variables)
                if variables:
                    answering.add(str(n))
            assert {kind for kind, _ in outcomes(ws, answering).values()} == {"data"}
        body = wait_for(lambda b: b["hub"]["subscribers"] >= 90, base)
        assert body["hub"]["subscribers"] >= 90 and body["hub"]["streams"] == 6, body

        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        for ws in sockets:  # every socket is closed by the server
            with pytest.raises(ConnectionClosed):
                while True:
                    ws.recv(timeout=30)
        closed = time.monotonic() - began
        process.wait(timeout=60)
        stopped = time.monotonic() - began
    output = log.read_text(errors="replace")
    assert process.returncode in (0, -signal.SIGTERM), output[-3000:]  # uvicorn re-raises it
    assert "Application shutdown complete" in output, output[-3000:]
    for stuck in ("graceful shutdown exceeded", "still closing", "did not close within",
                  "cancelling it"):  # fmt: skip
        assert stuck not in output, output[-3000:]
    assert stopped < 15.0, f"{stopped:.1f} s"
    record("security-hub-shutdown",
           f"SIGTERM with 90 subscriptions on 6 change streams: sockets closed in "
           f"{closed:.2f} s, process exited in {stopped:.2f} s")  # fmt: skip


# -- the hubs' leases, directly ------------------------------------------------------------------


async def test_concurrent_leases_share_one_stream_and_the_last_leaver_closes_it(
    lake: Lake,
) -> None:
    datasets = Datasets(lake, ["archive", "staging"])
    await datasets.prepare()
    hubs = Hubs(lake, queue_size=10, max_streams=2, datasets=datasets)
    try:
        await hubs.get()  # the default dataset's hub, kept
        entered, leave = asyncio.Event(), asyncio.Event()
        holders = 0

        async def hold() -> None:
            nonlocal holders
            async with hubs.lease("archive") as hub:
                assert hub.running and hub.dataset == "archive"
                holders += 1
                if holders == 20:
                    entered.set()
                await leave.wait()

        tasks = [asyncio.create_task(hold()) for _ in range(20)]
        await asyncio.wait_for(entered.wait(), 30)
        assert hubs.stream_count() == 2 and hubs.datasets_watched() == ["archive", "production"]
        with pytest.raises(TooManyStreams) as refused:
            async with hubs.lease("staging"):
                pass
        assert refused.value.details == {"limit": 2, "dataset": "staging"}
        with pytest.raises(DatasetNotFound):
            async with hubs.lease("invented"):
                pass
        tasks[0].cancel()  # a subscriber cancelled mid-way gives its lease back too
        leave.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for _ in range(500):
            if hubs.stream_count() == 1:
                break
            await asyncio.sleep(0.01)
        assert hubs.stream_count() == 1 and hubs.datasets_watched() == ["production"]
        async with hubs.lease("staging") as hub:  # room again
            assert hub.running
        assert "invented" not in await lake.db.list_collection_names()
    finally:
        await hubs.stop()
    assert hubs.stream_count() == 0
    with pytest.raises(LakeUnavailable):  # no new stream once stopped
        async with hubs.lease():
            pass


def test_extra_datasets_are_checked_at_start_up() -> None:
    assert parse_dataset_list(" archive, staging-2 ,") == ["archive", "staging-2"]
    with pytest.raises(ConfigurationError) as refused:
        parse_dataset_list("archive, ../admin")
    assert refused.value.details["setting"] == "KINFLOW_EXTRA_DATASETS"
