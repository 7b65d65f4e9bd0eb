"""The repair flags an instance can owe, folded into one indexed field.

Four hints tell the heartbeat that a commit left work owed for right now:
``materialising`` (a large spawn's children are still being created),
``owesBulk`` (a bulk cohort verb cut between batches), ``owesAborts``
(condemned rows not drained) and ``owesCancels`` (cancel requests not made).
Each used to have a partial index of its own. Every index on the dataset
costs every instance write, whether or not the instance carries the hint:
the embedded lake reads each index's catalogue entry on each write, and four
indexes fewer cut a child fire's commit by about 17 % of the lake's CPU
(docs/performance.md, "Fewer indexes on the dataset").

So the stored document also carries ``owing``: the names of the flags it has
set, space-separated in ``FLAGS`` order (``"owesAborts owesCancels"``), and
absent when it owes none. One partial index serves all four: the query for
one flag lists every value that contains it (``owed_query``). The flags stay
the instance's own fields; ``owing`` is derived from them whenever the
document is written (``Instance.stored_json``). Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from typing import Any

FLAGS = ("materialising", "owesBulk", "owesAborts", "owesCancels")
FIELD = "owing"


def owing_of(doc: Mapping[str, Any]) -> str | None:
    """The ``owing`` value of a document with these flags (``None``: owes nothing)."""
    return " ".join(flag for flag in FLAGS if doc.get(flag) is True) or None


def values_with(flag: str) -> list[str]:
    """Every ``owing`` value that contains ``flag``."""
    others = [f for f in FLAGS if f != flag]
    values = []
    for size in range(len(others) + 1):
        for rest in combinations(others, size):
            chosen = {flag, *rest}
            values.append(" ".join(f for f in FLAGS if f in chosen))
    return values


def owed_query(flag: str) -> dict[str, Any]:
    """The filter on ``owing`` for the instances that owe ``flag``.

    The ``$gt: ""`` is there for the embedded lake's planner: it uses the partial
    index (filter ``owing > ""``) only for a query that states that range; with
    ``$in`` alone it reads the whole collection.
    """
    if flag not in FLAGS:
        raise ValueError(f"not a repair flag: {flag}")
    return {FIELD: {"$gt": "", "$in": values_with(flag)}}
