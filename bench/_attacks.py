"""Denial-of-service attempts run beside the soak's honest clients.

Each attack is one a security review found (docs/security.md): a nested GROQ
query over thousands of documents, subscriptions to invented datasets,
oversized idempotency keys, squatted engine ids and a very large deploy. The
attacker repeats them until the soak ends while a probe asks ``/healthz`` four
times a second; the soak prints how each attempt was answered and the probe's
latency, so a run shows whether the server stayed responsive under load *and*
attack.

Outcomes are tallied by the code the server answered with (``ok`` when it
accepted the request), never counted as the honest clients' errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter, defaultdict
from typing import Any

import httpx
from pymongo import AsyncMongoClient
from pymongo.errors import BulkWriteError
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

NESTED_GROQ = ('count(*[_type=="atkrow" && n < 4 && count(*[count(*[n == ^.n]) > 0]) > 0])')
SEED_ROWS = 2_000
INVENTED_DATASETS = 20
BIG_STAGES = 12_000


def big_definition() -> dict[str, Any]:
    """A definition of ``BIG_STAGES`` chained stages (about 1.7 MB of JSON)."""
    stages: list[dict[str, Any]] = [
        {"name": f"s{i}", "activities": [{"name": f"a{i}", "actions": [
            {"name": "go", "status": "done"}]}],
         "transitions": [{"name": f"t{i}", "to": f"s{i + 1}"}]}
        for i in range(BIG_STAGES - 1)
    ]  # fmt: skip
    stages.append({"name": f"s{BIG_STAGES - 1}"})
    return {"name": "attack-huge", "title": "Huge", "initialStage": "s0", "fields": [],
            "stages": stages}


class AttackTally:
    """How each attack was answered, and the health probe's latencies."""

    def __init__(self) -> None:
        self.outcomes: dict[str, Counter[str]] = defaultdict(Counter)
        self.healthz: list[float] = []
        self.healthz_failures: Counter[str] = Counter()

    def record(self, attack: str, body: dict[str, Any] | None, status: int) -> None:
        errors = (body or {}).get("errors") or []
        if errors:
            code = (errors[0].get("extensions") or {}).get("code", "graphql")
            self.outcomes[attack][str(code)] += 1
        elif status >= 400:
            self.outcomes[attack][f"http-{status}"] += 1
        else:
            self.outcomes[attack]["ok"] += 1

    def report(self) -> None:
        print("denial-of-service attempts (answers by code):")
        for attack in sorted(self.outcomes):
            print(f"  {attack:<22} {dict(self.outcomes[attack])}")
        if self.healthz:
            ordered = sorted(self.healthz)
            p50 = ordered[len(ordered) // 2] * 1000
            p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000
            slow = sum(1 for value in ordered if value > 1.0)
            print(f"  healthz during attacks: {len(ordered)} probes, p50 {p50:.1f} ms, "
                  f"p99 {p99:.1f} ms, max {ordered[-1] * 1000:.1f} ms, over 1 s: {slow}, "
                  f"failures: {dict(self.healthz_failures) or '-'}")


async def _post(http: httpx.AsyncClient, tally: AttackTally, attack: str, query: str,
                variables: dict[str, Any] | None = None) -> None:
    try:
        response = await http.post("/graphql", json={"query": query,
                                                      "variables": variables or {}})
        body = response.json() if response.content else None
    except (httpx.HTTPError, ValueError) as exc:
        tally.outcomes[attack][type(exc).__name__] += 1
        return
    tally.record(attack, body if isinstance(body, dict) else None, response.status_code)


async def seed(lake_uri: str, database: str = "kinflow", dataset: str = "production") -> None:
    """The documents the nested query walks, written straight into the lake.

    Seeding ``SEED_ROWS`` documents through ``putDocument`` would take longer than
    a short soak; the query only needs them to exist in the dataset.
    """
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(lake_uri)
    try:
        rows = [{"_id": f"atkrow-{n}", "_type": "atkrow", "_rev": "seed", "n": n % 7}
                for n in range(SEED_ROWS)]
        with contextlib.suppress(BulkWriteError):  # a rerun on the same lake
            await client[database][dataset].insert_many(rows, ordered=False)
    finally:
        await client.close()


async def _invented_datasets(ws_url: str, tally: AttackTally, round_no: int) -> None:
    subscription = "subscription($id: ID!, $ds: String) { documentChanged(id: $id, dataset: $ds) }"
    try:
        async with connect(ws_url, subprotocols=[Subprotocol("graphql-transport-ws")],
                           open_timeout=10) as ws:
            await ws.send(json.dumps({"type": "connection_init", "payload": {}}))
            await asyncio.wait_for(ws.recv(), 10)
            for i in range(INVENTED_DATASETS):
                await ws.send(json.dumps({"id": str(i), "type": "subscribe", "payload": {
                    "query": subscription,
                    "variables": {"id": "x", "ds": f"ds-{round_no}-{i}"}}}))
            deadline = time.monotonic() + 5
            answered = 0
            while answered < INVENTED_DATASETS and time.monotonic() < deadline:
                try:
                    message = json.loads(await asyncio.wait_for(ws.recv(), 1.0))
                except TimeoutError:
                    continue
                if message.get("type") == "error":
                    answered += 1
                    payload = message.get("payload") or [{}]
                    code = ((payload[0] if isinstance(payload, list) else payload)
                            .get("extensions") or {}).get("code", "graphql")
                    tally.outcomes["invented-datasets"][str(code)] += 1
                elif message.get("type") == "next":  # execution errors come as `next`
                    answered += 1
                    errors = (message.get("payload") or {}).get("errors") or []
                    code = ((errors[0].get("extensions") or {}).get("code", "graphql")
                            if errors else "ok")
                    tally.outcomes["invented-datasets"][str(code)] += 1
            tally.outcomes["invented-datasets"]["unanswered"] += INVENTED_DATASETS - answered
    except Exception as exc:  # tallied, never fatal: the soak goes on
        tally.outcomes["invented-datasets"][type(exc).__name__] += 1


async def _target_instance(http: httpx.AsyncClient) -> str:
    """An article review of the attacker's own, whose verbs get the oversized keys."""
    article = {"_id": "atk-article", "_type": "article", "title": "x", "locales": ["de"]}
    await http.post("/graphql", json={"query": "mutation($d: JSON!) { putDocument(document: $d) }",
                                      "variables": {"d": article}})
    started = await http.post("/graphql", json={
        "query": "mutation { startInstance(definition: \"article-review\", "
                 "fields: {subject: \"atk-article\"}) { instance { id } } }"})
    return str(started.json()["data"]["startInstance"]["instance"]["id"])


async def attacker(base: str, lake_uri: str, deadline: float, tally: AttackTally) -> None:
    """Cycle through the attacks until the soak ends (one at a time, ~1 s apart)."""
    huge = big_definition()
    ws_url = base.replace("http://", "ws://") + "/graphql"
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as http:
        await seed(lake_uri)
        target = await _target_instance(http)
        round_no = 0
        while time.monotonic() < deadline:
            round_no += 1
            await _post(http, tally, "nested-groq", "query($q: String!) { groq(query: $q) }",
                        {"q": NESTED_GROQ})
            await _invented_datasets(ws_url, tally, round_no)
            await _post(http, tally, "huge-idempotency-key",
                        "mutation($id: ID!, $k: String) { fireAction(instanceId: $id, "
                        "activity: \"write\", action: \"submit\", idempotencyKey: $k) "
                        "{ changed } }", {"id": target, "k": "K" * 1_000_000})
            await _post(http, tally, "squat-lease-id",
                        "mutation($d: JSON!) { putDocument(document: $d) }",
                        {"d": {"_id": f"lease.tick.instance.x{round_no}", "_type": "squat"}})
            if round_no % 5 == 1:
                await _post(http, tally, "huge-deploy",
                            "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) "
                            "{ definitions { name } } }", {"d": [huge]})
            await asyncio.sleep(1.0)


async def health_probe(base: str, deadline: float, tally: AttackTally) -> None:
    """``/healthz`` four times a second; its latency is what an operator's monitor sees."""
    async with httpx.AsyncClient(base_url=base, timeout=10.0) as http:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            try:
                response = await http.get("/healthz")
            except httpx.HTTPError as exc:
                tally.healthz_failures[type(exc).__name__] += 1
            else:
                tally.healthz.append(time.perf_counter() - started)
                if response.status_code != 200:
                    tally.healthz_failures[f"http-{response.status_code}"] += 1
            await asyncio.sleep(0.25)
