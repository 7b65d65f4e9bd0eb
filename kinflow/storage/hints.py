"""Pick the index a lake query should use, and name it as a hint.

The embedded server's planner only uses an index when every predicate of the
filter is among the index's keys: ``{_id: x, _type: t}`` or
``{_type: t, nextEvaluationAt: {$lte: now}, completedAt: null}`` scan the whole
collection, which the worker's and engine's queries cannot afford. So the lake
names the index itself: ``_id`` equality first, else the declared index whose
leading key the filter constrains, whose partial filter the query implies,
and which covers the most of the filter's fields besides ``_type``. MongoDB's own planner would
choose the same indexes; the hint only removes the guesswork.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

RANGE_OPERATORS = frozenset({"$eq", "$in", "$gt", "$gte", "$lt", "$lte"})


def _constrains(value: Any) -> bool:
    """An equality or a range an index can seek on (not $ne, $exists, $or ...)."""
    if isinstance(value, Mapping):
        return bool(value) and all(op in RANGE_OPERATORS for op in value)
    return not isinstance(value, list)


def choose_hint(filter_: Mapping[str, Any], indexes: Iterable[Any]) -> str | None:
    """The index name to hint for ``filter_``, or None to leave it to the server.

    ``indexes`` are ``IndexSpec``-like objects with ``name``, ``keys`` and
    ``partial``.
    """
    if "_id" in filter_ and _constrains(filter_["_id"]):
        return "_id_"
    best: tuple[tuple[int, int, int], str] | None = None
    for spec in indexes:
        keys = [key for key, _ in spec.keys]
        if not keys or keys[0] not in filter_ or not _constrains(filter_[keys[0]]):
            continue
        partial = spec.partial or {}
        if any(filter_.get(k) != v for k, v in partial.items()):
            continue  # the query does not imply the partial filter: unusable
        # `_type` alone says little (a few types hold most documents): rank by the
        # other keys covered, then by a partial filter the query implies, then by all
        covered = [key for key in keys if key in filter_]
        score = (sum(1 for key in covered if key != "_type"), 1 if partial else 0, len(covered))
        if best is None or score > best[0]:
            best = (score, spec.name)
    return best[1] if best else None
