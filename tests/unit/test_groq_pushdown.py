"""Push-down translation (pure): the Mongo prefilter is a superset of GROQ's matches.

A tiny in-memory matcher (test-only) implements the Mongo semantics the translator
relies on (array traversal, null matching missing, type bracketing) so the superset
property can be checked on generated documents without a server.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinflow.groq import evaluate, parse
from kinflow.groq.pushdown import plan_store_query, translate

# ------------------------------------------------------------------ in-memory Mongo matcher

_MISSING = object()


def _values(doc: Any, path: list[str]) -> list[Any]:
    """Every value a dotted path reaches, descending into arrays like Mongo does."""
    if not path:
        return [doc]
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        return _values(doc.get(head, _MISSING), rest) if head in doc else [_MISSING]
    if isinstance(doc, list):
        out: list[Any] = []
        for item in doc:
            if isinstance(item, dict | list):
                out += [v for v in _values(item, path) if v is not _MISSING]
        return out or [_MISSING]
    return [_MISSING]


def _bracket(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "num"
    if isinstance(v, str):
        return "str"
    return "other"


def _candidates(v: Any) -> list[Any]:
    return [v, *v] if isinstance(v, list) else [v]


def _eq(v: Any, c: Any) -> bool:
    if c is None:
        return v is _MISSING or any(x is None for x in _candidates(v))
    return any(_bracket(x) == _bracket(c) and x == c for x in _candidates(v)
               if x is not _MISSING)


def _op(values: list[Any], op: str, arg: Any, options: str) -> bool:
    if op == "$ne":
        return not any(_eq(v, arg) for v in values)
    if op == "$in":
        return any(_eq(v, a) for v in values for a in arg)
    if op == "$exists":
        return any(v is not _MISSING for v in values) == arg
    if op == "$type":
        return any(isinstance(v, list) for v in values)
    if op == "$regex":
        rx = re.compile(arg, re.I if "i" in options else 0)
        return any(isinstance(x, str) and rx.search(x) for v in values for x in _candidates(v))
    cmp = {"$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b,
           "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b}[op]
    return any(_bracket(x) == _bracket(arg) and cmp(x, arg)
               for v in values if v is not _MISSING for x in _candidates(v))


def mongo_match(doc: dict[str, Any], flt: dict[str, Any]) -> bool:
    for key, cond in flt.items():
        if key == "$and":
            if not all(mongo_match(doc, f) for f in cond):
                return False
            continue
        if key == "$or":
            if not any(mongo_match(doc, f) for f in cond):
                return False
            continue
        values = _values(doc, key.split("."))
        if isinstance(cond, dict) and cond and all(k.startswith("$") for k in cond):
            options = cond.get("$options", "")
            if not all(_op(values, k, a, options) for k, a in cond.items() if k != "$options"):
                return False
        elif not any(_eq(v, cond) for v in values):
            return False
    return True


def test_matcher_sanity() -> None:
    assert mongo_match({"a": [1, 2]}, {"a": 2})
    assert mongo_match({}, {"a": None})
    assert not mongo_match({"a": [{"b": 1}]}, {"a.b": None})
    assert mongo_match({"a": [{"b": 1}]}, {"a.b": 1})
    assert not mongo_match({"a": "1"}, {"a": {"$gt": 0}})


# ------------------------------------------------------------------ fixed translations


def test_shapes_translate() -> None:
    tr = translate(parse("_type == 'article' && slug.current == $slug").root, {"slug": "x"})
    assert tr is not None
    assert tr.filter == {"_type": "article", "slug.current": "x"}  # flat: index-friendly
    assert not tr.exact
    tr = translate(parse("_id in ['a', 'b']").root)
    assert tr is not None and tr.exact and tr.filter == {"_id": {"$in": ["a", "b"]}}
    assert translate(parse("a == b").root) is None
    tr = translate(parse("a == b || c == 1").root)
    assert tr is None


def test_plan_for_count_and_paging() -> None:
    plan = plan_store_query(parse("count(*[_type == 'a'])"))
    assert plan is not None and plan.count_only and plan.filter == {"_type": "a"}
    plan = plan_store_query(parse("*[_type == 'a'][2...5]{_id}"))
    assert plan is not None and plan.skip == 2 and plan.limit == 3
    plan = plan_store_query(parse("*[_type == 'a' && x > 1][0]"))
    assert plan is not None and plan.limit is None and not plan.exact
    assert plan_store_query(parse("1 + 2")) is None
    plan = plan_store_query(parse("*[_type == 'a']{'n': count(*)}"))
    assert plan is not None and plan.filter == {}


def test_every_star_site_is_covered() -> None:
    plan = plan_store_query(parse("*[_type == 'a']{'b': *[_type == 'b' && p._ref == ^._id]}"))
    assert plan is not None
    assert plan.filter == {"$or": [{"_type": "a"}, {"_type": "b"}]}


# ------------------------------------------------------------------ superset property

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(
    ["a", "b", "ab", "hello world", "Hello.there"]))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(["b", "c"]), inner, max_size=2)),
    max_leaves=6,
)
DOCS = st.lists(
    st.fixed_dictionaries({"_type": st.sampled_from(["x", "y"])},
                          optional={"a": VALUES, "n": VALUES, "s": VALUES}),
    max_size=8,
)
CONST = st.sampled_from(["null", "true", "false", "0", "1", "2", "'a'", "'b'", "'ab'"])
PATH = st.sampled_from(["a", "n", "s", "a.b", "a.b.c", "_type"])
ATOM = st.one_of(
    st.builds(lambda p, o, c: f"{p} {o} {c}", PATH,
              st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), CONST),
    st.builds(lambda c, p: f"{c} == {p}", CONST, PATH),
    st.builds(lambda p, c1, c2: f"{p} in [{c1}, {c2}]", PATH, CONST, CONST),
    st.builds(lambda c, p: f"{c} in {p}", CONST, PATH),
    st.builds(lambda p: f"{p} in 0..2", PATH),
    st.builds(lambda p: f"defined({p})", PATH),
    st.builds(lambda p: f"!defined({p})", PATH),
    st.builds(lambda p: f"{p}", PATH),
    st.builds(lambda p, c: f"!({p} == {c})", PATH, CONST),
    st.builds(lambda p, t: f"{p} match '{t}'", PATH, st.sampled_from(["hel*", "a", "there"])),
    st.builds(lambda p, t: f"string::startsWith({p}, '{t}')", PATH, st.sampled_from(["a", "h"])),
)
COND = st.recursive(
    ATOM,
    lambda inner: st.one_of(st.builds(lambda a, b: f"({a}) && ({b})", inner, inner),
                            st.builds(lambda a, b: f"({a}) || ({b})", inner, inner)),
    max_leaves=4,
)


@settings(max_examples=300, deadline=None)
@given(DOCS, COND)
def test_prefilter_is_a_superset(docs: list[dict[str, Any]], cond: str) -> None:
    for i, d in enumerate(docs):
        d["_id"] = f"d{i}"
    query = f"*[{cond}]._id"
    expected = evaluate(query, dataset=docs)
    plan = plan_store_query(parse(query))
    assert plan is not None
    kept = [d for d in docs if mongo_match(d, plan.filter)]
    kept_ids = {d["_id"] for d in kept}
    assert set(expected) <= kept_ids, plan.filter
    assert evaluate(query, dataset=kept) == expected
    if plan.exact:
        assert sorted(kept_ids) == sorted(expected)


@pytest.mark.parametrize(
    "cond",
    ["a.b == null", "a.b != 1", "!defined(a.b)", "a.b in [null, 1]", "!(a.b == 2)"],
)
def test_negative_shapes_keep_documents_behind_arrays(cond: str) -> None:
    docs = [{"_id": "d", "_type": "x", "a": [{"b": 2}]}, {"_id": "e", "_type": "x", "a": "s"}]
    expected = evaluate(f"*[{cond}]._id", dataset=docs)
    plan = plan_store_query(parse(f"*[{cond}]"))
    assert plan is not None
    assert set(expected) <= {d["_id"] for d in docs if mongo_match(d, plan.filter)}


# ------------------------------------------------------------------ store path (fake collection)


class _Cursor:
    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs

    async def to_list(self, length: int | None) -> list[dict[str, Any]]:
        return list(self.docs)


class FakeCollection:
    """Just enough of pymongo's AsyncCollection for query_collection, over the matcher."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = sorted(docs, key=lambda d: d["_id"])
        self.finds: list[dict[str, Any]] = []

    def find(self, flt: dict[str, Any], sort: Any = None, skip: int = 0, limit: int = 0
             ) -> _Cursor:
        self.finds.append(flt)
        hits = [d for d in self.docs if mongo_match(d, flt)][skip:]
        return _Cursor(hits[:limit] if limit else hits)

    async def count_documents(self, flt: dict[str, Any]) -> int:
        return sum(1 for d in self.docs if mongo_match(d, flt))


STORE_DOCS = [
    {"_id": "a1", "_type": "article", "slug": {"current": "one"}, "author": {"_ref": "p1"}},
    {"_id": "a2", "_type": "article", "slug": {"current": "two"}, "author": {"_ref": "p2"}},
    {"_id": "p1", "_type": "person", "name": "Ann", "boss": {"_ref": "p2"}},
    {"_id": "p2", "_type": "person", "name": "Bob"},
]


@pytest.mark.parametrize(
    "query",
    [
        "*[_type == 'article' && slug.current == $slug]{_id, 'by': author->name}",
        "*[_type == 'article'][0]{'boss': author->boss->name}",
        "*[_type == 'article'][1..5]._id",
        "count(*[_type == 'person'])",
        "*[_type == 'person' && count(*[_type == 'article' && author._ref == ^._id]) > 0].name",
        "$doc.author->name",
    ],
)
async def test_query_collection_equals_in_memory(query: str) -> None:
    from kinflow.groq.store import query_collection

    params = {"slug": "two", "doc": STORE_DOCS[0]}
    coll = FakeCollection(STORE_DOCS)
    got = await query_collection(coll, query, params=params)
    assert got == evaluate(query, dataset=coll.docs, params=params)
