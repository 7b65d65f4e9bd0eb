"""GROQ over the lake: the push-down path must always equal the in-memory path.

Hypothesis generates documents and filters; each example stores the documents
in a real collection, runs the query through ``query_collection`` (a MongoDB
prefilter plus the in-memory re-check) and through ``evaluate`` over every
stored document, and compares. The index test checks that a typical content
lookup is served by an index scan.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymongo import AsyncMongoClient, MongoClient

from kinflow.groq import evaluate, parse
from kinflow.groq.pushdown import plan_store_query
from kinflow.groq.store import query_collection
from kinflow.storage.indexes import content_indexes

SCALARS = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from(["x", "y", "3"]),
                    st.booleans(), st.floats(-3, 3, allow_nan=False))  # fmt: skip
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3))


@st.composite
def documents(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(0, 12))
    docs = []
    for i in range(count):
        doc: dict[str, Any] = {"_id": f"d{i:02d}", "_type": draw(st.sampled_from(["a", "b"]))}
        for name in ("n", "tag"):
            if draw(st.booleans()):
                doc[name] = draw(VALUES)
        if draw(st.booleans()):
            doc["obj"] = {"x": draw(SCALARS)}
        if draw(st.booleans()):
            doc["ref"] = {"_ref": f"d{draw(st.integers(0, 12)):02d}"}
        docs.append(doc)
    return docs


ATOMS = st.one_of(
    st.builds(lambda f, op, v: f"{f} {op} {v}",
              st.sampled_from(["n", "tag", "obj.x", "_type", "_id", "missing"]),
              st.sampled_from(["==", "!=", "<", "<=", ">", ">="]),
              st.sampled_from(["1", "0", "-2", "2.5", '"x"', '"a"', '"d03"', "true", "null"])),
    st.builds(lambda f: f"defined({f})", st.sampled_from(["n", "tag", "obj", "obj.x", "ref"])),
    st.builds(lambda v, f: f"{v} in {f}", st.sampled_from(['"x"', "1", "null"]),
              st.sampled_from(["tag", "n"])),
    st.builds(lambda f: f"{f} in [1, \"x\", null]", st.sampled_from(["n", "tag", "obj.x"])),
    st.builds(lambda v: f"_id in [{v}]", st.sampled_from(['"d01"', '"d01", "d05"', ""])),
    st.sampled_from(["true", "false", "null", 'ref->_type == "a"', "count(tag) > 1",
                     '_type match "a*"', "!defined(n)"]),
)  # fmt: skip
FILTERS = st.recursive(
    ATOMS,
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"({a}) && ({b})", inner, inner),
        st.builds(lambda a, b: f"({a}) || ({b})", inner, inner),
        st.builds(lambda a: f"!({a})", inner),
    ),
    max_leaves=4,
)
SHAPES = st.sampled_from([
    "*[{f}]", "*[{f}]{{_id, n}}", "count(*[{f}])", "*[{f}][0]", "*[{f}][1..3]._id",
    "*[{f}] | order(n desc, _id)", "*[{f}]._id", "*[{f}][0...2]",
])  # fmt: skip


@pytest.fixture(scope="module")
def collection_name(lake_uri: str) -> Iterator[tuple[str, str]]:
    database = f"groq_{uuid.uuid4().hex[:10]}"
    yield database, "production"
    client: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    client.drop_database(database)
    client.close()


async def _via_lake(uri: str, database: str, name: str, query: str) -> Any:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri)
    try:
        return await query_collection(client[database][name], query)
    finally:
        await client.close()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(docs=documents(), condition=FILTERS, shape=SHAPES)
def test_lake_path_equals_memory_path(
    lake_uri: str, collection_name: tuple[str, str], docs: list[dict[str, Any]],
    condition: str, shape: str,
) -> None:  # fmt: skip
    database, name = collection_name
    query = shape.format(f=condition)
    client: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    try:
        coll = client[database][name]
        coll.delete_many({})
        if docs:
            coll.insert_many(docs)
        stored = list(coll.find({}).sort("_id", 1))
    finally:
        client.close()
    expected = evaluate(query, dataset=stored)
    actual = asyncio.run(_via_lake(lake_uri, database, name, query))
    assert actual == expected, query


async def test_content_lookup_is_served_by_an_index(lake: Any) -> None:
    await lake.declare_indexes(content_indexes("_type,slug.current"))
    docs = [{"_id": f"doc-{i:05d}", "_type": "article" if i % 2 else "author",
             "slug": {"current": f"slug-{i}"}} for i in range(10_000)]  # fmt: skip
    await lake.collection().insert_many(docs)
    query = '*[_type == "article" && slug.current == $slug]'
    plan = plan_store_query(parse(query), {"slug": "slug-4321"})
    assert plan is not None
    explain = await lake.collection().find(plan.filter).explain()
    winning = str(explain["queryPlanner"]["winningPlan"])
    assert "IXSCAN" in winning and "COLLSCAN" not in winning
    result = await query_collection(lake.collection(), query, params={"slug": "slug-4321"})
    assert [d["_id"] for d in result] == ["doc-04321"]


async def test_a_query_reading_more_than_the_fetch_cap_is_refused(lake: Any) -> None:
    """Documents fetched are held in memory: ``*`` over more than the cap is refused."""
    from kinflow.groq.budget import Budget
    from kinflow.groq.errors import GroqLimitExceeded

    await lake.collection().insert_many([{"_id": f"row-{i:03d}", "_type": "row", "n": i}
                                         for i in range(120)])  # fmt: skip
    with pytest.raises(GroqLimitExceeded) as refused:
        await query_collection(lake.collection(), 'count(*[_type == "row" && n >= 0])',
                               budget=Budget(max_scanned=1_000_000, max_fetched=100))
    assert refused.value.details["limit"] == "documents-fetched"
    narrowed = await query_collection(lake.collection(), '*[_type == "row"][0...10]',
                                      budget=Budget(max_scanned=1_000_000, max_fetched=100))
    assert len(narrowed) == 10
    under = await query_collection(lake.collection(), 'count(*[_type == "row" && n < 50])',
                                   budget=Budget(max_scanned=1_000_000, max_fetched=100))
    assert under == 50
