"""Store-backed evaluation: run a GROQ query against a pymongo ``AsyncCollection``.

Owns the I/O half of push-down: fetch the prefiltered documents (sorted by ``_id``,
the order ``*`` has), evaluate the query in memory over them, and serve ``->`` from
the same collection. ``resolve`` must be synchronous, so dereferences are gathered
in rounds: evaluate, fetch every id that was missing with one ``$in`` query, and
evaluate again until nothing is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kinflow.groq.api import Tree, evaluate, parse
from kinflow.groq.errors import GroqError
from kinflow.groq.pushdown import plan_store_query

MAX_DEREF_ROUNDS = 16


async def query_collection(
    collection: Any,
    query: str | Tree,
    *,
    params: Mapping[str, Any] | None = None,
    now: datetime | None = None,
    max_docs: int | None = None,
) -> Any:
    """Evaluate ``query`` over ``collection``; same result as evaluating in memory.

    ``max_docs`` bounds how many documents the prefilter may bring back; a query
    whose prefilter matches more raises :class:`GroqError` (``groq-too-broad``).
    """
    params = dict(params or {})
    if now is None:
        now = datetime.now(UTC)  # one clock for every evaluation round
    tree = query if isinstance(query, Tree) else parse(query)
    if tree.needs_params and not tree.params_bound:
        tree = parse(tree.source, params)
    plan = plan_store_query(tree, params)
    docs: list[Any] = []
    residual = tree
    if plan is not None:
        if plan.count_only:
            return await collection.count_documents(plan.filter)
        limit = plan.limit
        if limit == 0:
            docs = []
        else:
            cap = limit if limit is not None else (max_docs + 1 if max_docs is not None else 0)
            cursor = collection.find(plan.filter, sort=plan.sort, skip=plan.skip, limit=cap)
            docs = await cursor.to_list(None)
            if limit is None and max_docs is not None and len(docs) > max_docs:
                raise GroqError(f"query matches more than {max_docs} documents",
                                query=tree.source, reason="groq-too-broad")
        if plan.residual is not tree.root:
            residual = Tree(tree.source, plan.residual, tree.params_read, False, True)

    cache: dict[str, Any] = {}
    for d in docs:
        if isinstance(d, Mapping) and isinstance(d.get("_id"), str):
            cache[str(d["_id"])] = d
    missing: set[str] = set()

    def resolve(ref: str) -> Any:
        if ref in cache:
            return cache[ref]
        missing.add(ref)
        return None

    for _ in range(MAX_DEREF_ROUNDS):
        missing.clear()
        result = evaluate(residual, dataset=docs, params=params, now=now, resolve=resolve)
        if not missing:
            return result
        wanted = sorted(missing)
        fetched = await collection.find({"_id": {"$in": wanted}}).to_list(None)
        for ref in wanted:
            cache[ref] = None
        for d in fetched:
            cache[str(d.get("_id"))] = d
    raise GroqError("too many rounds of dereferences", query=tree.source)
