"""The lake's bulk writes: what the engine used raw collections for, now with deadlines."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kinflow.errors import InvalidInput, RevisionConflict
from kinflow.storage import Lake

MOMENT = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


async def test_update_many_gives_every_match_a_new_rev(lake: Lake) -> None:
    """A writer fenced on a _rev it loaded before a bulk update must miss."""
    loaded = await lake.create_many([{"_id": f"c{i}", "_type": "t", "to": "p", "token": 1}
                                     for i in range(3)])  # fmt: skip
    await lake.create({"_id": "other", "_type": "t", "to": "q"})
    matched = await lake.update_many({"to": "p"}, {"$unset": {"to": "", "token": ""}},
                                     now=MOMENT)  # fmt: skip
    assert matched == 3
    for before in loaded:
        after = await lake.get(before["_id"])
        assert after is not None and "to" not in after and "token" not in after
        assert after["_rev"] != before["_rev"]
        assert after["_updatedAt"] == "2026-03-01T09:30:00.000Z"
        with pytest.raises(RevisionConflict):
            await lake.update(before["_id"], {"$set": {"to": "p"}}, expected_rev=before["_rev"])
    untouched = await lake.get("other")
    assert untouched is not None and untouched["to"] == "q"


async def test_update_many_refuses_system_fields_and_bare_documents(lake: Lake) -> None:
    await lake.create({"_id": "a", "_type": "t"})
    with pytest.raises(InvalidInput):
        await lake.update_many({"_type": "t"}, {"$set": {"_rev": "forged"}})
    with pytest.raises(InvalidInput):
        await lake.update_many({"_type": "t"}, {"n": 1})
    stored = await lake.get("a")
    assert stored is not None and "n" not in stored


async def test_create_missing_skips_existing_and_inserts_the_rest(lake: Lake) -> None:
    await lake.create({"_id": "k1", "_type": "t", "n": "first"})
    inserted = await lake.create_missing(
        [{"_id": f"k{i}", "_type": "t", "n": "batch"} for i in range(4)], now=MOMENT)
    assert inserted == 3
    kept = await lake.get("k1")
    assert kept is not None and kept["n"] == "first"
    found = await lake.get_many(["k0", "k2", "k3"])
    assert sorted(found) == ["k0", "k2", "k3"]
    assert all(doc["_createdAt"] == "2026-03-01T09:30:00.000Z" for doc in found.values())
    assert await lake.create_missing([{"_id": "k0", "_type": "t"}]) == 0
    assert await lake.create_missing([]) == 0


async def test_create_missing_refuses_a_document_without_type(lake: Lake) -> None:
    with pytest.raises(InvalidInput):
        await lake.create_missing([{"_id": "x"}])
    assert await lake.get("x") is None


async def test_delete_with_match_leaves_another_holders_document(lake: Lake) -> None:
    await lake.create({"_id": "lease", "_type": "t", "holder": "w1"})
    assert await lake.delete("lease", match={"holder": "w2"}) is False
    assert await lake.get("lease") is not None
    assert await lake.delete("lease", match={"holder": "w1"}) is True
    assert await lake.get("lease") is None


async def test_groq_reads_one_dataset(lake: Lake) -> None:
    await lake.create_many([{"_id": f"g{i}", "_type": "item", "n": i} for i in range(4)])
    await lake.ensure_dataset("staging")
    await lake.create({"_id": "s", "_type": "item", "n": 9}, dataset="staging")
    found = await lake.groq('*[_type == "item" && n >= $min] | order(n)',
                            params={"min": 2}, now=MOMENT)  # fmt: skip
    assert [doc["n"] for doc in found] == [2, 3]
    assert await lake.groq('count(*[_type == "item"])', dataset="staging") == 1
