"""Order-like families driven through the API of several kinflow processes at once.

An ``order`` spawns three ``order-line`` children when it starts; a client
packs each line, waits until the order's gate has moved it to ``ready``,
and ships it (the ``ship`` effect then runs in a worker). Each call goes to
a random live API; one subscriber per order watches it on another API than
the one that started it, so a change made through one process must reach a
subscriber of the other. Everything a client was told succeeded is kept, to
check afterwards that nothing acknowledged was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect

from kinflow.engine import Engine
from tests.reliability.effect_log import runs

LINES = ("a", "b", "c")
HANDLER = Path(__file__).with_name("ship_handler.py")
SETTLED = "count($subworkflows[activity == 'lines' && current && status == 'active']) == 0"

ORDER_LINE: dict[str, Any] = {
    "name": "order-line", "title": "Order line", "lifecycle": "child", "initialStage": "picking",
    "fields": [{"name": "sku", "type": "string", "initialValue": {"type": "input"}}],
    "stages": [
        {"name": "picking", "activities": [{"name": "pick", "actions": [
            {"name": "pack", "status": "done"}]}],
         "transitions": [{"name": "to-packed", "to": "packed"}]},
        {"name": "packed"},
    ],
}  # fmt: skip
ORDER: dict[str, Any] = {
    "name": "order", "title": "Order", "initialStage": "open", "fields": [],
    "stages": [
        {"name": "open", "activities": [{"name": "lines", "actions": [
            {"name": "fan-out", "when": "true", "spawn": {
                "forEach": json.dumps(list(LINES)), "definition": {"name": "order-line"},
                "with": {"sku": "$row"}, "onExit": "abort"}},
            {"name": "all-packed", "when": SETTLED, "status": "done"}]}],
         "transitions": [{"name": "to-ready", "to": "ready"}]},
        {"name": "ready", "activities": [{"name": "ship", "actions": [
            {"name": "ship", "status": "done", "effects": [{"name": "ship"}]}]}],
         "transitions": [{"name": "to-shipped", "to": "shipped"}]},
        {"name": "shipped"},
    ],
}  # fmt: skip
DEFINITIONS = [ORDER_LINE, ORDER]

DEPLOY = "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }"
START = ('mutation { startInstance(definition: "order") '
         "{ instance { id subworkflows { childId } } } }")
FIRE = ("mutation($id: ID!, $a: String!, $b: String!) { fireAction(instanceId: $id, "
        "activity: $a, action: $b) { instance { id currentStage } } }")
READ = "query($id: ID!) { instance(id: $id) { currentStage } }"
WATCH = "subscription($id: ID!) { instanceChanged(id: $id) { kind instance { currentStage } } }"


@dataclass
class Tally:
    """What the clients did and were told."""

    calls: Counter[str] = field(default_factory=Counter)
    codes: Counter[str] = field(default_factory=Counter)  # refusals by extensions.code
    transport: Counter[str] = field(default_factory=Counter)  # no answer (a killed API)
    slowest: float = 0.0
    started: set[str] = field(default_factory=set)
    packed: set[str] = field(default_factory=set)
    shipped: set[str] = field(default_factory=set)
    watched: int = 0
    seen_elsewhere: int = 0  # subscribers that saw their order ship through another API
    watch_errors: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        return (f"{len(self.started)} orders started, {len(self.shipped)} shipped, "
                f"{sum(self.calls.values())} calls, refusals {dict(self.codes) or 'none'}, "
                f"no answer {dict(self.transport) or 'none'}, slowest call "
                f"{self.slowest:.1f} s, {self.seen_elsewhere}/{self.watched} subscribers saw "
                f"their order ship through another API")


class Apis:
    """The live API base URLs; a killed one is dropped so clients stop choosing it."""

    def __init__(self, bases: list[str], rng: random.Random) -> None:
        self.live = list(bases)
        self.rng = rng

    def pick(self, other_than: str | None = None) -> str:
        choices = [b for b in self.live if b != other_than] or self.live
        return self.rng.choice(choices)

    def drop(self, base: str) -> None:
        if base in self.live and len(self.live) > 1:
            self.live.remove(base)


async def call(tally: Tally, base: str, op: str, query: str,
               variables: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """One GraphQL call; returns its data, or None after counting why not."""
    tally.calls[op] += 1
    began = time.monotonic()
    try:
        async with httpx.AsyncClient(base_url=base, timeout=60.0) as http:
            response = await http.post("/graphql", json={"query": query,
                                                          "variables": variables or {}})
        body = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        tally.transport[type(exc).__name__] += 1
        return None
    finally:
        tally.slowest = max(tally.slowest, time.monotonic() - began)
    if body.get("errors"):
        tally.codes[str((body["errors"][0].get("extensions") or {}).get("code"))] += 1
        return None
    data: dict[str, Any] = body["data"]
    return data


async def deploy(base: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as http:
        answer = (await http.post("/graphql", json={"query": DEPLOY,
                                                    "variables": {"d": DEFINITIONS}})).json()
    assert not answer.get("errors"), answer


async def watch(tally: Tally, base: str, order: str, ready: asyncio.Event,
                deadline: float) -> None:
    """Follow ``order`` over a websocket until it ships (or the test's time is up)."""
    url = base.replace("http://", "ws://") + "/graphql"
    tally.watched += 1
    try:
        async with asyncio.timeout(max(1.0, deadline - time.monotonic())):
            async with connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
                await ws.send(json.dumps({"type": "connection_init", "payload": {}}))
                await ws.recv()
                await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {
                    "query": WATCH, "variables": {"id": order}}}))
                ready.set()
                async for raw in ws:
                    message = json.loads(raw)
                    if message.get("type") == "error":
                        code = (message["payload"][0].get("extensions") or {}).get("code")
                        tally.watch_errors[str(code)] += 1
                        return
                    if message.get("type") == "complete":
                        return
                    if message.get("type") != "next":
                        continue
                    payload = message["payload"]
                    if payload.get("errors"):
                        code = (payload["errors"][0].get("extensions") or {}).get("code")
                        tally.watch_errors[str(code)] += 1
                        return
                    if payload["data"]["instanceChanged"]["instance"]["currentStage"] == \
                            "shipped":
                        tally.seen_elsewhere += 1
                        return
    except Exception as exc:  # a killed API, or time is up
        tally.watch_errors[type(exc).__name__] += 1
    finally:
        ready.set()


async def one_order(apis: Apis, tally: Tally, deadline: float,
                    watchers: list[asyncio.Task[None]]) -> None:
    base = apis.pick()
    started = await call(tally, base, "start", START)
    if started is None:
        return
    instance = started["startInstance"]["instance"]
    order = instance["id"]
    tally.started.add(order)
    ready = asyncio.Event()
    watchers.append(asyncio.create_task(watch(tally, apis.pick(other_than=base), order, ready,
                                              deadline + 30)))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(ready.wait(), 10)
    for row in instance["subworkflows"]:
        for _ in range(3):  # a refusal (the lake restarting) is retried a few times
            if await call(tally, apis.pick(), "pack", FIRE,
                          {"id": row["childId"], "a": "pick", "b": "pack"}) is not None:
                tally.packed.add(row["childId"])
                break
            await asyncio.sleep(0.5)
    while time.monotonic() < deadline + 20:  # the gate moves it once every line is stamped
        read = await call(tally, apis.pick(), "read", READ, {"id": order})
        if read is not None and read["instance"]["currentStage"] == "ready":
            break
        await asyncio.sleep(0.2)
    else:
        return
    for _ in range(3):
        if await call(tally, apis.pick(), "ship", FIRE,
                      {"id": order, "a": "ship", "b": "ship"}) is not None:
            tally.shipped.add(order)
            return
        await asyncio.sleep(0.5)


async def drive(apis: Apis, clients: int, seconds: float, tally: Tally) -> None:
    """``clients`` loops of whole orders for ``seconds``, then every subscriber's end."""
    deadline = time.monotonic() + seconds
    watchers: list[asyncio.Task[None]] = []

    async def loop() -> None:
        while time.monotonic() < deadline:
            await one_order(apis, tally, deadline, watchers)

    await asyncio.gather(*(loop() for _ in range(clients)))
    await asyncio.gather(*watchers)


async def check_orders(engine: Engine, tally: Tally, log: Path,
                       killed: set[int]) -> dict[str, int]:
    """Nothing acknowledged lost, no child stamped twice, no effect run twice.

    A ``ship`` effect may run again only when the first run was in a process
    that was then killed before it could record the completion (delivery is
    at least once; kinflow only promises no second run while the first
    runner lives).
    """
    docs = {str(d["_id"]): d for d in await engine.lake.find({"_type": "kinflow.instance"})}
    for order in tally.started:
        assert order in docs, f"acknowledged order {order} lost"
    for line in tally.packed:
        assert docs.get(line, {}).get("currentStage") == "packed", f"packed line {line} lost"
    for order in tally.shipped:
        assert docs[order].get("currentStage") == "shipped", f"shipped order {order} not shipped"
    stamps = 0
    for doc in docs.values():
        resolved = Counter(str((h.get("instanceRef") or {}).get("id"))
                           for h in doc.get("history", [])
                           if h.get("_type") == "subworkflowResolved")
        for child, n in resolved.items():
            assert n == 1, f"{doc['_id']}: child {child} stamped {n} times"
        stamps += sum(resolved.values())
    ran_by = runs(log)
    twice = {key: pids for key, pids in ran_by.items() if len(pids) > 1}
    for key, pids in twice.items():
        assert pids[0] in killed, f"effect {key} ran {len(pids)} times (pids {pids})"
    shipped = [d for d in docs.values() if d.get("definition") == "order"
               and d.get("currentStage") == "shipped"]
    ran = {key.split(":", 1)[0] for key in ran_by}
    for doc in shipped:
        assert str(doc["_id"]) in ran, f"{doc['_id']} shipped but its ship effect never ran"
    return {"instances": len(docs), "stamps": stamps, "effects": len(ran_by),
            "effects_rerun_after_kill": len(twice), "shipped": len(shipped)}
