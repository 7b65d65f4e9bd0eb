"""Security findings 4-6 replayed through the API, as the attacker sent them.

4. a key reused for another action silently replayed: now refused;
5. three pings with 5.5 MB keys bricked a child and left its parent's cancel
   half-done: keys are bounded, an instance cannot grow past its limit, and
   the parent's abort still reaches the child (shown with lowered limits);
6. an operator squatted a lease and a definition id: engine ids are refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

from tests.engine.cohort_defs import child, items, parent
from tests.reliability.api import client, codes, gql, serving
from tests.reliability.figures import record

pytestmark = pytest.mark.lake

START = """mutation($d: String!, $f: JSON) {
  startInstance(definition: $d, fields: $f) { instance { id } } }"""
FIRE = """mutation($i: ID!, $a: String!, $b: String!, $k: String, $p: JSON) {
  fireAction(instanceId: $i, activity: $a, action: $b, idempotencyKey: $k, params: $p) {
    changed instance { currentStage status } } }"""
DEPLOY = """mutation($d: [JSON!]!) {
  deployDefinitions(definitions: $d) { definitions { name version } } }"""
PUT = "mutation($d: JSON!) { putDocument(document: $d) }"


@pytest.fixture
def database(lake_uri: str) -> Iterator[str]:
    name = f"sec_{uuid.uuid4().hex[:12]}"
    yield name
    mongo: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    mongo.drop_database(name)
    mongo.close()


def pingable_child() -> dict[str, Any]:
    definition = child()
    task = definition["stages"][0]["activities"][0]
    task["actions"].append({"name": "ping"})
    return definition


def error(body: dict[str, Any]) -> dict[str, Any]:
    assert body.get("errors"), body
    extensions: dict[str, Any] = body["errors"][0]["extensions"]
    return extensions


async def family(http: Any) -> tuple[str, list[str]]:
    """A parent ``p`` with two live ``c`` children; returns (parent id, child ids)."""
    status, body = await gql(http, DEPLOY, {"d": [pingable_child(), parent()]})
    assert status == 200 and not body.get("errors"), body
    _, body = await gql(http, START, {"d": "p", "f": items("a", "b")})
    pid = body["data"]["startInstance"]["instance"]["id"]
    _, body = await gql(http, FIRE, {"i": pid, "a": "go", "b": "go"})
    assert not body.get("errors"), body
    _, body = await gql(http, "query($i: ID!) { instance(id: $i) { subworkflows { childId } } }",
                        {"i": pid})
    return pid, [row["childId"] for row in body["data"]["instance"]["subworkflows"]]


async def test_a_key_reused_for_another_action_is_refused(lake_uri: str, database: str) -> None:
    async with serving(lake_uri, database) as app, client(app) as http:
        _, kids = await family(http)
        kid = kids[0]
        _, first = await gql(http, FIRE, {"i": kid, "a": "task", "b": "ping", "k": "K1"})
        assert first["data"]["fireAction"]["changed"] is True
        _, retry = await gql(http, FIRE, {"i": kid, "a": "task", "b": "ping", "k": "K1"})
        assert retry["data"]["fireAction"]["changed"] is False  # a retry replays
        _, reused = await gql(http, FIRE, {"i": kid, "a": "task", "b": "finish", "k": "K1"})
        found = error(reused)
        assert found["code"] == "contract-violation"
        assert found["details"]["reason"] == "idempotency-key-reused"
        _, state = await gql(http, "query($i: ID!) { instance(id: $i) { status } }", {"i": kid})
        assert state["data"]["instance"]["status"] == "ACTIVE"  # nothing silently swallowed
        _, done = await gql(http, FIRE, {"i": kid, "a": "task", "b": "finish", "k": "K2"})
        assert done["data"]["fireAction"]["instance"]["status"] == "COMPLETED"


async def test_a_five_megabyte_key_is_refused_and_writes_nothing(lake_uri: str,
                                                                 database: str) -> None:
    async with serving(lake_uri, database) as app, client(app) as http:
        _, kids = await family(http)
        mongo: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
        try:
            before = mongo[database]["production"].find_one({"_id": kids[0]})
            for _ in range(3):  # the attack: three pings with 5.5 MB keys
                _, body = await gql(http, FIRE, {"i": kids[0], "a": "task", "b": "ping",
                                                 "k": "K" * 5_500_000})
                found = error(body)
                assert found["code"] == "input-too-large"
                assert found["details"]["argument"] == "idempotencyKey"
                assert found["details"]["limit"] == 256
            assert mongo[database]["production"].find_one({"_id": kids[0]}) == before
        finally:
            mongo.close()


async def test_a_growing_child_is_refused_and_the_parents_abort_still_cascades(
        lake_uri: str, database: str) -> None:
    """The brick scenario with limits scaled down 100x (keys 55 kB, instances 160 kB)."""
    async with serving(lake_uri, database, max_idempotency_key_bytes=60_000,
                       max_instance_bytes=160_000) as app, client(app) as http:
        pid, kids = await family(http)
        refused: dict[str, Any] | None = None
        pings = 0
        for n in range(3 * 4):
            _, body = await gql(http, FIRE, {"i": kids[0], "a": "task", "b": "ping",
                                             "k": str(n % 10) * 55_000 + str(n)})
            if body.get("errors"):
                refused = error(body)
                break
            pings += 1
        assert refused is not None and refused["code"] == "instance-too-large", refused
        assert refused["details"]["limit"] == 160_000
        _, aborted = await gql(http, """mutation($i: ID!) { abortInstance(instanceId: $i,
            reason: "cancel") { instance { status subworkflows { status } } } }""", {"i": pid})
        assert not aborted.get("errors"), aborted
        rows = aborted["data"]["abortInstance"]["instance"]["subworkflows"]
        assert [row["status"] for row in rows] == ["ABORTED", "ABORTED"]
        _, after = await gql(http, "query($i: ID!) { instance(id: $i) { status } }",
                             {"i": kids[0]})
        assert after["data"]["instance"]["status"] == "ABORTED"
        mongo: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
        try:
            lake = mongo[database]["production"]
            assert lake.count_documents({"owesAborts": True}) == 0  # no half-done cascade
            assert lake.count_documents({"propagateTo": {"$exists": True}}) == 0
        finally:
            mongo.close()
        record("security-instance-guard", f"security: a child took {pings} pings with 55 kB "
                                          "keys before instance-too-large; its parent's abort "
                                          "then aborted both children")


async def test_engine_ids_cannot_be_squatted(lake_uri: str, database: str) -> None:
    async with serving(lake_uri, database) as app, client(app) as http:
        pid, kids = await family(http)
        squats = [
            {"_id": f"lease.tick.{kids[0]}", "_type": "article", "expiresAt": "9999"},
            {"_id": "definition.p.v2", "_type": "article"},
            {"_id": "definition.c.v2", "_type": "kinflow.definition"},
            {"_id": "instance.01SQUAT", "_type": "article"},
        ]
        for squat in squats:
            _, body = await gql(http, PUT, {"d": squat})
            assert codes(body) == ["reserved-id"], (squat, body)
        for doc_id in ("definition.p.v1", kids[0], f"lease.tick.{pid}"):
            _, body = await gql(http, "mutation($i: ID!) { deleteDocument(id: $i) }",
                                {"i": doc_id})
            assert codes(body) == ["reserved-id"], (doc_id, body)
        _, body = await gql(http, """mutation { startInstance(definition: "p",
            instanceId: "definition.p.v3") { changed } }""")
        assert codes(body) == ["reserved-id"]
        _, body = await gql(http, PUT, {"d": {"_id": "x", "_type": "kinflow.lease"}})
        assert codes(body) == ["reserved-type"]
        # the admin's next deploy still gets its ids
        changed = parent()
        changed["title"] = "P, second version"
        _, body = await gql(http, DEPLOY, {"d": [changed]})
        assert body["data"]["deployDefinitions"]["definitions"] == [{"name": "p", "version": 2}]
        mongo: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
        try:
            lake = mongo[database]["production"]
            assert lake.count_documents({"_type": "article"}) == 0
            assert lake.count_documents({"_id": {"$regex": "^lease\\."}}) == 0
        finally:
            mongo.close()
