"""The orders ``Query.instances`` pages in, each with its cursor.

Ascending ids is the plain order. Newest first is by ``startedAt`` (then id)
descending, not by id: a started instance's id is time-ordered, but a child's
id is a hash of its parent's, so an id order would scatter children among
roots of any age. A cursor holds what the order compares (base64 JSON), and
the next page starts strictly after it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Doc = dict[str, Any]
Cursor = dict[str, str]


def encode(values: Cursor) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode()


def decode(cursor: str) -> Cursor | None:
    """The values of a cursor this API issued; ``None`` for anything else."""
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("after"), str):
        return None
    if not all(isinstance(v, str) for v in value.values()):
        return None
    return value


@dataclass(frozen=True, slots=True)
class Order:
    """One listing order: the lake sort, and the page filter after a cursor."""

    sort: list[tuple[str, int]]
    _after: Callable[[Cursor], dict[str, Any] | None]
    _values: Callable[[Doc], Cursor]

    def cursor(self, doc: Doc) -> str:
        return encode(self._values(doc))

    def after(self, query: dict[str, Any], cursor: str) -> dict[str, Any] | None:
        """``query`` narrowed to what follows ``cursor``; ``None``: not a cursor of this
        order."""
        values = decode(cursor)
        condition = self._after(values) if values is not None else None
        if condition is None:
            return None
        return {"$and": [query, condition]} if query else condition


def _after_id(values: Cursor) -> dict[str, Any]:
    return {"_id": {"$gt": values["after"]}}


def _after_newest(values: Cursor) -> dict[str, Any] | None:
    started = values.get("startedAt")
    if started is None:
        return None
    return {"$or": [{"startedAt": {"$lt": started}},
                    {"startedAt": started, "_id": {"$lt": values["after"]}}]}


BY_ID = Order([("_id", 1)], _after_id, lambda doc: {"after": str(doc["_id"])})
NEWEST_FIRST = Order([("startedAt", -1), ("_id", -1)], _after_newest,
                     lambda doc: {"after": str(doc["_id"]),
                                  "startedAt": str(doc.get("startedAt") or "")})
