"""Bad input: every one is refused with a documented code, and nothing partial is written.

The whole database is read before and after (every document of every
collection); the two must be equal. Codes must be in README's error table
(or be a GraphQL validation error, which the GraphQL spec types itself); an
``internal-error`` or a 5xx is a bug.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pymongo import AsyncMongoClient

from kinflow.engine import Engine
from tests.reliability import bad_inputs
from tests.reliability.api import client, codes, gql, serving
from tests.reliability.family import ROOT, open_lake
from tests.reliability.figures import record

pytestmark = pytest.mark.lake
ARTICLE_REVIEW = json.loads((ROOT / "examples" / "definitions" / "article-review.json")
                            .read_text())
MB = 1024 * 1024


def documented_codes() -> set[str]:
    """The codes in README's "Limits and error codes" table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Limits and error codes", 1)[1].split("\n## ", 1)[0]
    return {code for line in section.splitlines() if line.startswith("| `")
            for code in re.findall(r"`([a-z-]+)`", line.split("|")[1])}


async def snapshot(mongo: AsyncMongoClient[dict[str, Any]], database: str
                   ) -> dict[str, list[dict[str, Any]]]:
    db = mongo[database]
    # ``<dataset>.engine`` holds the processes' own bookkeeping (session ledger, leases),
    # which moves on by itself; every other collection must be left as it was
    return {name: await db[name].find({}).sort("_id", 1).to_list(None)
            for name in sorted(await db.list_collection_names())
            if not name.endswith(".engine")}


def outcome(status: int, body: dict[str, Any], known: set[str]) -> str:
    """The refusal's code; fails on acceptance, a 5xx, or an undocumented code."""
    assert status < 500, body
    found = codes(body)
    assert found, f"accepted: {body}"
    if found[0] == "None":
        assert body.get("data") is None, body
        return "graphql-validation"
    assert found[0] in known and found[0] != "internal-error", body
    return found[0]


@pytest.fixture
async def mongo(lake_uri: str) -> AsyncIterator[AsyncMongoClient[dict[str, Any]]]:
    connection: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(lake_uri)
    yield connection
    await connection.close()


async def test_bad_input_is_refused_and_writes_nothing(
        lake_uri: str, mongo: AsyncMongoClient[dict[str, Any]], seed: int) -> None:
    rng = random.Random(seed)
    known = documented_codes()
    database = f"rel_{uuid.uuid4().hex[:12]}"
    lake = open_lake(lake_uri, database)
    engine = Engine(lake)
    try:
        await engine.ensure_ready()
        await lake.create({"_id": "article-1", "_type": "article", "locales": ["de", "fr"]})
        await engine.deploy(ARTICLE_REVIEW)
        parent = (await engine.start_instance(
            "article-review", fields={"subject": "article-1"})).instance.id_
        await engine.fire_action(parent, "write", "submit")
        child = (await engine.get_instance(parent)).subworkflows[0].child_id
        bomb = await _bomb(engine)
        tried: Counter[str] = Counter()
        async with serving(lake_uri, database) as app, client(app) as http:
            before = await snapshot(mongo, database)
            translate, review = ARTICLE_REVIEW
            cases: list[bad_inputs.Case] = []
            for valid in (review, translate):
                cases += [(label, bad_inputs.DEPLOY, {"d": [translate, broken]})
                          for label, broken in bad_inputs.mutated_definitions(valid, rng, 40)]
                cases += [(label, bad_inputs.DEPLOY, {"d": [translate, broken]})
                          for label, broken in bad_inputs.malformed_groq(valid, rng)]
            cases += bad_inputs.wrong_values(parent, child)
            cases += bad_inputs.unknown_ids()
            for label, operation, variables in cases:
                status, body = await gql(http, operation, variables)
                tried[outcome(status, body, known)] += 1
                assert label

            await _oversized(http, known, tried)
            await _fan_out_bomb(http, engine, bomb, known, tried)

            status, body = await gql(http, "{ definitions { name } }")
            assert status == 200 and not body.get("errors"), body  # still up and answering
            after = await snapshot(mongo, database)
        changed = [name for name in before if before[name] != after.get(name)]
        assert not changed and set(after) == set(before), f"partial writes in {changed}"
        total = sum(tried.values())
        record("bad-input", f"bad input: {total} tried, {total} refused, dataset unchanged; "
                            f"by code {dict(sorted(tried.items()))}")
    finally:
        await mongo.drop_database(database)
        await lake.close()


async def _oversized(http: httpx.AsyncClient, known: set[str], tried: Counter[str]) -> None:
    """A 20 MB body, declared and streamed without a length: 413 ``request-too-large``."""
    padding = "x" * (20 * MB)
    query = "mutation($p: JSON) { tick(instanceId: \"x\") { changed } }"
    body = json.dumps({"query": query, "variables": {"p": padding}}).encode()
    response = await http.post("/graphql", content=body,
                               headers={"content-type": "application/json"})
    assert response.status_code == 413
    tried[outcome(200, response.json(), known)] += 1

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), MB):
            yield body[start:start + MB]

    response = await http.post("/graphql", content=chunks(),
                               headers={"content-type": "application/json"})
    assert response.status_code == 413
    tried[outcome(200, response.json(), known)] += 1


async def _bomb(engine: Engine) -> str:
    """An instance whose caller-fired ``fan-out`` has 100,000 rows to spawn."""
    bomb_child = {"name": "bomb-child", "title": "Bomb child", "lifecycle": "child",
                  "initialStage": "work", "fields": [
                      {"name": "item", "type": "string", "initialValue": {"type": "input"}}],
                  "stages": [{"name": "work", "activities": [{"name": "t", "actions": [
                      {"name": "finish", "status": "done"}]}],
                      "transitions": [{"name": "to-done", "to": "done"}]}, {"name": "done"}]}
    bomb = {"name": "bomb", "title": "Bomb", "initialStage": "go", "fields": [
        {"name": "items", "type": "array", "of": [{"name": "name", "type": "string"}],
         "initialValue": {"type": "input"}}],
        "stages": [{"name": "go", "activities": [{"name": "spread", "actions": [
            {"name": "fan-out", "spawn": {"forEach": "$fields.items[].name",
                                          "definition": {"name": "bomb-child"},
                                          "with": {"item": "$row"}}},
            {"name": "stop", "status": "done"}]}],
            "transitions": [{"name": "to-end", "to": "end"}]}, {"name": "end"}]}
    await engine.deploy([bomb_child, bomb])
    rows = [{"name": f"r{n}"} for n in range(100_000)]
    # the set-up itself is over KINFLOW_MAX_VALUE_BYTES (1.8 MB of rows): an engine
    # with room for it starts the instance the attack then fires
    roomy = Engine(engine.lake, limits=dataclasses.replace(engine.limits, value_bytes=4 * MB))
    started = await roomy.start_instance("bomb", fields={"items": rows})
    return started.instance.id_


async def _fan_out_bomb(http: httpx.AsyncClient, engine: Engine, iid: str, known: set[str],
                        tried: Counter[str]) -> None:
    """Firing it is refused whole by ``fan-out-limit``: no row, no child, same revision."""
    before = await engine.get_instance(iid)
    status, body = await gql(http, bad_inputs.FIRE, {"id": iid, "a": "spread", "b": "fan-out"})
    code = outcome(status, body, known)
    assert code == "fan-out-limit", body
    tried[code] += 1
    after = await engine.get_instance(iid)
    assert after.rev_ == before.rev_ and after.subworkflows == []
    assert await engine.lake.count({"_type": "kinflow.instance", "definition": "bomb-child"}) == 0
