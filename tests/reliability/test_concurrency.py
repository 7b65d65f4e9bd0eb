"""Concurrency: 50 clients fire on one cohort's children and on its parent through GraphQL.

Every logical request carries an idempotency key and is sent by several
clients at once (a retrying frontend, a double click); some requests carry
no key. ``ping`` actions resolve nothing, so each application leaves one
``actionFired`` row: exactly-once means the rows on every instance equal the
distinct keys that succeeded plus the unkeyed successes. A ``cancel`` of the
parent races the children's ``finish``; afterwards the heartbeat settles
and the checker asserts the kill tests' invariants.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from kinflow.engine import Engine
from kinflow.storage import Lake
from tests.reliability.api import client, codes, gql, serving
from tests.reliability.family import open_lake
from tests.reliability.figures import record
from tests.reliability.invariants import Ledger, settle

pytestmark = pytest.mark.lake

CLIENTS = 50
CHILDREN = 10
FIRE = """mutation($id: ID!, $activity: String!, $action: String!, $key: String) {
  fireAction(instanceId: $id, activity: $activity, action: $action, idempotencyKey: $key) {
    changed instance { id status currentStage } } }"""
EXPECTED_REFUSALS = {"action-disabled", "concurrent-modification"}


def child_definition() -> dict[str, Any]:
    return {"name": "ctr-child", "title": "Child", "lifecycle": "child", "initialStage": "work",
            "fields": [{"name": "item", "type": "string", "initialValue": {"type": "input"}}],
            "stages": [{"name": "work", "activities": [{"name": "task", "actions": [
                {"name": "ping"}, {"name": "finish", "status": "done"}]}],
                "transitions": [{"name": "to-done", "to": "done"}]}, {"name": "done"}]}


def parent_definition() -> dict[str, Any]:
    spawn = {"forEach": "$fields.items[].name", "definition": {"name": "ctr-child"},
             "with": {"item": "$row"}, "onExit": "abort"}
    settled = "count($subworkflows[activity == 'cohort' && current && status == 'active']) == 0"
    return {"name": "ctr-parent", "title": "Parent", "initialStage": "review",
            "fields": [{"name": "items", "type": "array", "of": [{"name": "name",
                                                                  "type": "string"}],
                        "initialValue": {"type": "input"}}],
            "stages": [{"name": "review", "activities": [
                {"name": "cohort", "actions": [{"name": "fan-out", "when": "true", "spawn": spawn},
                                               {"name": "all-done", "when": settled,
                                                "status": "done"}]},
                {"name": "manage", "actions": [{"name": "ping"},
                                               {"name": "close", "status": "done"},
                                               {"name": "cancel", "status": "failed"}]}],
                "transitions": [{"name": "to-cancelled", "to": "cancelled",
                                 "when": "$anyActivityFailed"},
                                {"name": "to-done", "to": "done"}]},
                {"name": "done"}, {"name": "cancelled"}]}


@dataclass(frozen=True)
class Request:
    instance: str
    activity: str
    action: str
    key: str | None


@pytest.fixture
async def engine(lake_uri: str) -> AsyncIterator[Engine]:
    database = f"rel_{uuid.uuid4().hex[:12]}"
    lake: Lake = open_lake(lake_uri, database)
    built = Engine(lake)
    await built.ensure_ready()
    yield built
    await lake.client.drop_database(database)
    await lake.close()


def plan(parent: str, children: list[str], rng: random.Random, cancel: bool
         ) -> list[Request]:
    """Every request, with each keyed one repeated by several clients."""
    requests: list[Request] = []
    for child in children:
        for k in range(4):
            requests += [Request(child, "task", "ping", f"ping-{child}-{k}")] * 3
        requests += [Request(child, "task", "finish", f"finish-{child}")] * 2
        requests.append(Request(child, "task", "ping", None))
    for k in range(10):
        requests += [Request(parent, "manage", "ping", f"ping-{parent}-{k}")] * 3
    requests += [Request(parent, "manage", "ping", None)] * 5
    final = "cancel" if cancel else "close"
    requests += [Request(parent, "manage", final, f"{final}-{parent}")] * 3
    rng.shuffle(requests)
    return requests


async def run_client(app: Any, requests: list[Request], outcomes: list[tuple[Request, str]]
                     ) -> None:
    async with client(app) as http:
        for request in requests:
            variables = {"id": request.instance, "activity": request.activity,
                         "action": request.action, "key": request.key}
            for _attempt in range(6):  # what a client does with concurrent-modification
                status, body = await gql(http, FIRE, variables)
                assert status < 500, body
                found = codes(body)
                if found != ["concurrent-modification"]:
                    break
            assert set(found) <= EXPECTED_REFUSALS, body
            outcomes.append((request, found[0] if found else "ok"))


def applied_pings(history: list[dict[str, Any]]) -> int:
    return sum(1 for row in history if row.get("_type") == "actionFired"
               and row.get("action") == "ping")


@pytest.mark.parametrize("cancel", [False, True], ids=["close", "cancel-races-children"])
async def test_fifty_clients_apply_each_keyed_request_once(
        lake_uri: str, engine: Engine, seed: int, cancel: bool) -> None:
    rng = random.Random(seed)
    await engine.deploy([child_definition(), parent_definition()])
    database = engine.lake.database
    async with serving(lake_uri, database) as app:
        started = await engine.start_instance(
            "ctr-parent", fields={"items": [{"name": f"c{n}"} for n in range(CHILDREN)]})
        parent = started.instance.id_
        children = [row.child_id for row in started.instance.subworkflows]
        assert len(children) == CHILDREN
        requests = plan(parent, children, rng, cancel)
        outcomes: list[tuple[Request, str]] = []
        shares = [requests[n::CLIENTS] for n in range(CLIENTS)]
        await asyncio.gather(*(run_client(app, share, outcomes) for share in shares))
        async with client(app) as http:  # the server is still up and answering
            status, body = await gql(http, "query($id: ID!) { instance(id: $id) { id } }",
                                     {"id": parent})
            assert status == 200 and not body.get("errors"), body
    assert len(outcomes) == len(requests)

    await settle(engine)
    ledger = Ledger()
    await ledger.check(engine, rng, sample=CHILDREN + 1)
    exactly_once = 0
    for iid in [parent, *children]:
        mine = [(r, result) for r, result in outcomes if r.instance == iid
                and r.action == "ping"]
        keys = {r.key for r, result in mine if r.key is not None and result == "ok"}
        unkeyed = sum(1 for r, result in mine if r.key is None and result == "ok")
        history = (await engine.get_instance(iid)).history
        assert applied_pings(history) == len(keys) + unkeyed, iid
        exactly_once += 1
    final = (await engine.get_instance(parent)).currentStage
    assert final in {"done", "cancelled"} if cancel else final == "done"
    results = Counter(result for _r, result in outcomes)
    record(f"concurrency-{'cancel' if cancel else 'close'}",
           f"concurrency ({'cancel races' if cancel else 'close'}): {CLIENTS} clients, "
           f"{len(requests)} requests, outcomes {dict(results)}, parent ended {final}, "
           f"{exactly_once} instances checked exactly-once, {ledger.checks} invariant checks")
