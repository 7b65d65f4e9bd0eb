"""``putDocuments``: many content documents per call, each checked as ``putDocument`` checks
one, written in batches; a refused document names its index and writes nothing of its batch."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from kinflow.engine.content_writes import put_documents
from kinflow.errors import RevisionConflict
from kinflow.storage import Lake
from tests.api.conftest import data, error_code, gql

pytestmark = pytest.mark.lake

PUT = """mutation($d: [JSON!]!, $ds: String) { putDocuments(documents: $d, dataset: $ds) {
  count created replaced ids } }"""
COUNT = '{ groq(query: "count(*[_type == \\"note\\"])") }'


def notes(count: int, start: int = 0, **extra: Any) -> list[dict[str, Any]]:
    return [{"_id": f"note-{n:05d}", "_type": "note", "n": n, **extra}
            for n in range(start, start + count)]


def stored(client: TestClient, token: str | None = None) -> int:
    found: int = data(gql(client, COUNT, token=token))["groq"]
    return found


def details(body: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = body["errors"][0]["extensions"]["details"]
    return found


def test_put_documents_writes_and_replaces_in_batches(client: TestClient) -> None:
    first = data(gql(client, PUT, {"d": notes(2500)}))["putDocuments"]
    assert (first["count"], first["created"], first["replaced"]) == (2500, 2500, 0)
    assert first["ids"][:2] == ["note-00000", "note-00001"] and len(first["ids"]) == 2500
    assert stored(client) == 2500
    before = data(gql(client, '{ groq(query: "*[_id == \\"note-00007\\"][0]") }'))["groq"]
    again = data(gql(client, PUT, {"d": notes(3, start=6, edited=True)}))["putDocuments"]
    assert (again["count"], again["created"], again["replaced"]) == (3, 0, 3)
    after = data(gql(client, '{ groq(query: "*[_id == \\"note-00007\\"][0]") }'))["groq"]
    assert after["edited"] is True and after["_createdAt"] == before["_createdAt"]
    assert after["_rev"] != before["_rev"]
    generated = data(gql(client, PUT, {"d": [{"_type": "note", "n": -1}]}))["putDocuments"]
    assert generated["created"] == 1 and len(generated["ids"][0]) == 32
    fenced = data(gql(client, PUT, {"d": [{**notes(1, start=7)[0], "_rev": after["_rev"]}]}))
    assert fenced["putDocuments"]["replaced"] == 1


@pytest.mark.parametrize(("bad", "code"), [
    ({"_id": "instance.01HZZZZZZZZZZZZZZZZZZZZZZZ", "_type": "note"}, "reserved-id"),
    ({"_id": "x-1", "_type": "kinflow.instance"}, "reserved-type"),
    ({"_id": "x-1"}, "invalid-input"),
    ({"_id": "has space", "_type": "note"}, "gdr-invalid"),
    ("not an object", "invalid-input"),
    ({"_id": "x-1", "_type": "note", "n": [1, {"deep": 10**40}]}, "invalid-input"),
])
def test_a_bad_document_refuses_the_call_with_its_index(client: TestClient, bad: Any,
                                                        code: str) -> None:
    documents: list[Any] = [*notes(1500), bad, *notes(10, start=1500)]
    refused = gql(client, PUT, {"d": documents})
    assert error_code(refused) == code, refused
    assert details(refused)["index"] == 1500
    assert "documents[1500]" in refused["errors"][0]["message"]
    assert stored(client) == 0  # checked before anything was written


def test_an_id_twice_in_one_call_is_refused(client: TestClient) -> None:
    refused = gql(client, PUT, {"d": [*notes(3), notes(1, start=1)[0]]})
    assert error_code(refused) == "invalid-input"
    assert details(refused) == {"index": 3, "id": "note-00001", "duplicateOf": 1}
    assert stored(client) == 0


def test_a_stale_rev_rolls_its_whole_batch_back(client: TestClient) -> None:
    data(gql(client, PUT, {"d": notes(1)}))
    batch = [*notes(5, start=1), {**notes(1)[0], "_rev": "stale"}]
    refused = gql(client, PUT, {"d": batch})
    assert error_code(refused) == "revision-conflict"
    assert details(refused)["index"] == 5 and details(refused)["written"] == 0
    assert stored(client) == 1  # the five new ones were rolled back with it


async def test_batches_before_a_refused_one_stay_written(lake: Lake) -> None:
    """A refusal found while writing (a stale _rev) names how many earlier batches hold."""
    await put_documents(lake, "production", notes(1))
    documents = [*notes(4, start=1), {**notes(1)[0], "_rev": "stale"}, *notes(2, start=5)]
    with pytest.raises(RevisionConflict) as refused:
        await put_documents(lake, "production", documents, batch_size=2)
    assert refused.value.details["index"] == 4 and refused.value.details["written"] == 4
    assert await lake.count({"_type": "note"}) == 5  # note-0 + the first two batches
    report = await put_documents(lake, "production", notes(7), batch_size=3)
    assert (report.count, report.created, report.replaced) == (7, 2, 5)


def test_put_documents_has_the_role_put_document_has(secured: TestClient) -> None:
    viewer, operator, admin = ("view-token-for-tests", "op-token-for-tests",
                               "admin-token-for-tests")  # fmt: skip
    assert error_code(gql(secured, PUT, {"d": notes(2)}, viewer)) == "forbidden"
    assert stored(secured, viewer) == 0
    done = data(gql(secured, PUT, {"d": notes(2)}, operator))["putDocuments"]
    assert done["count"] == 2
    # a new dataset only for an admin, as with putDocument
    new = gql(secured, PUT, {"d": notes(1), "ds": "imports"}, operator)
    assert error_code(new) == "dataset-not-found"
    created = data(gql(secured, PUT, {"d": notes(1), "ds": "imports"}, admin))
    assert created["putDocuments"]["created"] == 1
