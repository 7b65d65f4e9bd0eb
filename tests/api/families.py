"""A parent with a cohort of children, laid out the way the engine's spawn stores them.

These tests build the registry rows (stored in chunk
documents beside the dataset: core/cohort/chunks.py) and the children's ``ancestors``
with direct lake writes, start and drive every instance through the API, and
stamp rows the way propagation does.
"""

from __future__ import annotations

import uuid
from typing import Any

from pymongo import MongoClient
from starlette.testclient import TestClient

from kinflow.core.cohort.chunks import CHUNK_TYPE, assemble
from kinflow.storage.database import side_name
from tests.api.conftest import data, gql
from tests.engine.definitions import simple

LEAF: dict[str, Any] = simple("leaf", [
    {"name": "translating", "activities": [{"name": "translate", "actions": [
        {"name": "submit", "status": "done"}, {"name": "give-up", "status": "failed"}]}],
     "transitions": [{"name": "to-done", "to": "done"},
                     {"name": "to-abandoned", "to": "abandoned", "when": "$anyActivityFailed"}]},
    {"name": "done"},
    {"name": "abandoned"},
])  # fmt: skip
HOLDER: dict[str, Any] = simple("holder", [
    {"name": "review", "activities": [
        {"name": "translate", "actions": [{"name": "all-done", "status": "done"}]},
        {"name": "approve", "actions": [{"name": "approve", "status": "done"}]}],
     "transitions": [{"name": "to-published", "to": "published"}]},
    {"name": "published"},
])  # fmt: skip
DEPLOY = "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }"
START = """mutation($def: String!, $id: ID) { startInstance(definition: $def, instanceId: $id) {
  instance { id } } }"""


def gdr(doc_id: str) -> str:
    return f"lake:production:{doc_id}"


def build_family(client: TestClient, lake_uri: str, database: str, parent: str,
                 locales: list[str], activity: str = "translate") -> list[str]:
    """Start ``parent`` and one child per locale, linked as a spawn links them."""
    data(gql(client, DEPLOY, {"d": [LEAF, HOLDER]}))
    data(gql(client, START, {"def": "holder", "id": parent}))
    children = [f"{parent}.{locale}" for locale in locales]
    for child in children:
        data(gql(client, START, {"def": "leaf", "id": child}))
    raw: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    coll = raw[database]["production"]
    holder = coll.find_one({"_id": parent})
    assert holder is not None
    entry = holder["stages"][-1]
    rows = [{
        "_key": f"row-{locale}", "activity": activity, "action": "fan-out", "definition": "leaf",
        "stageEntry": entry["_key"], "cohortStage": entry["name"], "rowKey": locale,
        "ref": {"id": gdr(child), "type": "kinflow.instance"},
        "spawnedAt": entry["enteredAt"],
    } for locale, child in zip(locales, children, strict=True)]  # fmt: skip
    for child in children:
        coll.update_one({"_id": child}, {"$set": {
            "ancestors": [{"id": gdr(parent), "type": "kinflow.instance"}]}})
    raw[database][side_name("production", "rows")].insert_one(
        {"_id": f"{parent}.0", "_type": CHUNK_TYPE, "parent": parent, "chunk": 0,
         "rows": rows, "history": []})
    coll.update_one({"_id": parent}, {"$set": {"rowCount": len(rows),
                                               "_rev": uuid.uuid4().hex[:16]}})
    raw.close()
    return children


def stored_parent(lake_uri: str, database: str, parent: str) -> dict[str, Any]:
    """The parent as readers see it, straight from the lake: its document and its rows."""
    raw: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    doc = raw[database]["production"].find_one({"_id": parent})
    rows = list(raw[database][side_name("production", "rows")].find({"parent": parent}))
    raw.close()
    assert doc is not None
    return assemble(doc, rows)


def stamp(lake_uri: str, database: str, parent: str, row_key: str, update: dict[str, Any]
          ) -> None:
    """Set fields of one registry row, as propagation and condemnation do (the row's
    document, and a new ``_rev`` on the parent)."""
    raw: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    raw[database][side_name("production", "rows")].update_one(
        {"parent": parent}, {"$set": {f"rows.$[row].{k}": v for k, v in update.items()}},
        array_filters=[{"row._key": row_key}])
    raw[database]["production"].update_one(
        {"_id": parent}, {"$set": {"_rev": uuid.uuid4().hex[:16]}})
    raw.close()
