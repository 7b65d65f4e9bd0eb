"""Store-backed evaluation: run a GROQ query against a pymongo ``AsyncCollection``.

Owns the I/O half of push-down: fetch the prefiltered documents (sorted by ``_id``,
the order ``*`` has), evaluate the query in memory over them, and serve ``->`` from
the same collection. ``resolve`` must be synchronous, so dereferences are gathered
in rounds: evaluate, fetch every id that was missing with one ``$in`` query, and
evaluate again until nothing is missing.

With a :class:`Budget`, each round is evaluated in a worker thread of the
caller's lane (:mod:`kinflow.groq.pool`) so the event loop keeps serving while
heavy queries run; the budget bounds the work, and when the awaiting task is
cancelled (the client went away) the budget is cancelled too, so the thread
stops at its next check instead of running on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from kinflow.groq.api import Tree, evaluate, parse
from kinflow.groq.budget import Budget
from kinflow.groq.errors import GroqError, GroqLimitExceeded
from kinflow.groq.pool import off_loop as run_in_lane
from kinflow.groq.pushdown import StorePlan, plan_store_query

MAX_DEREF_ROUNDS = 16
T = TypeVar("T")


async def off_loop(fn: Callable[[], T], budget: Budget, caller: str | None = None) -> T:
    """Run ``fn`` in an evaluation thread; cancelling the caller cancels ``budget``.

    The thread cannot be interrupted, so cancellation is cooperative: ``fn``
    must evaluate under ``budget``, which raises at its next check (a call still
    waiting for a thread is dropped). The deadline starts when ``fn`` does.
    ``caller`` names the API caller the work is for (``None``: the engine).
    """
    return await run_in_lane(fn, budget, caller)


async def query_collection(
    collection: Any,
    query: str | Tree,
    *,
    params: Mapping[str, Any] | None = None,
    now: datetime | None = None,
    max_docs: int | None = None,
    budget: Budget | None = None,
    caller: str | None = None,
) -> Any:
    """Evaluate ``query`` over ``collection``; same result as evaluating in memory.

    ``max_docs`` bounds how many documents the prefilter may bring back; a query
    whose prefilter matches more raises :class:`GroqError` (``groq-too-broad``).
    ``budget`` bounds the query's length, its parameters and its evaluation (its
    ``max_scanned`` also caps the fetch), and moves parsing and evaluation off the event
    loop, into ``caller``'s lane of the evaluation threads (``None``: the engine's).
    """
    params = dict(params or {})
    if now is None:
        now = datetime.now(UTC)  # one clock for every evaluation round

    def prepare() -> tuple[Tree, StorePlan | None]:
        tree = query if isinstance(query, Tree) else parse(query)
        if tree.needs_params and not tree.params_bound:
            tree = parse(tree.source, params)
        return tree, plan_store_query(tree, params)

    if budget is None:
        tree, plan = prepare()
    else:  # parsing and planning are CPU work too: off the loop, after the length check
        budget.check_length(query.source if isinstance(query, Tree) else query)
        budget.check_params(params)
        tree, plan = await off_loop(prepare, budget, caller)
    docs: list[Any] = []
    residual = tree
    if plan is not None:
        if plan.count_only:
            return await collection.count_documents(plan.filter)
        limit = plan.limit
        if limit == 0:
            docs = []
        else:
            fetch_cap = _fetch_cap(max_docs, budget)
            cap = limit if limit is not None else (fetch_cap + 1 if fetch_cap is not None else 0)
            cursor = collection.find(plan.filter, sort=plan.sort, skip=plan.skip, limit=cap)
            docs = await cursor.to_list(None)
            if limit is None and max_docs is not None and len(docs) > max_docs:
                raise GroqError(f"query matches more than {max_docs} documents",
                                query=tree.source, reason="groq-too-broad")
            if limit is None and budget is not None and budget.max_fetched is not None \
                    and len(docs) > budget.max_fetched:
                raise GroqLimitExceeded(
                    f"the query reads more than {budget.max_fetched} documents from the lake",
                    limit="documents-fetched", maxFetched=budget.max_fetched)
            if limit is None and budget is not None and budget.max_scanned is not None \
                    and len(docs) > budget.max_scanned:
                raise GroqLimitExceeded(
                    f"the query reads more than {budget.max_scanned} documents",
                    limit="documents-scanned", maxScanned=budget.max_scanned,
                    scanned=len(docs))
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

    def run() -> Any:
        return evaluate(residual, dataset=docs, params=params, now=now, resolve=resolve,
                        budget=budget)

    for _ in range(MAX_DEREF_ROUNDS):
        missing.clear()
        result = run() if budget is None else await off_loop(run, budget, caller)
        if not missing:
            return result
        wanted = sorted(missing)
        fetched = await collection.find({"_id": {"$in": wanted}}).to_list(None)
        for ref in wanted:
            cache[ref] = None
        for d in fetched:
            cache[str(d.get("_id"))] = d
    raise GroqError("too many rounds of dereferences", query=tree.source)


def _fetch_cap(max_docs: int | None, budget: Budget | None) -> int | None:
    from_budget = (budget.max_fetched, budget.max_scanned) if budget else ()
    caps = [c for c in (max_docs, *from_budget) if c is not None]
    return min(caps) if caps else None
