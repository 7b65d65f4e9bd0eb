"""Index declarations: what every dataset gets, and users' content indexes.

Indexes are data (``IndexSpec``) so the engine and the worker can add their
own without the lake learning what they mean.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pymongo


@dataclass(frozen=True)
class IndexSpec:
    """One index every dataset gets; ``partial`` is a partialFilterExpression.

    ``replaces`` names older indexes this one supersedes (an index's options
    cannot change under its name): they are dropped where this one is built.
    """

    name: str
    keys: tuple[tuple[str, int], ...]
    unique: bool = False
    partial: Mapping[str, Any] | None = None
    replaces: tuple[str, ...] = ()

    def model(self) -> pymongo.IndexModel:
        options: dict[str, Any] = {"name": self.name, "unique": self.unique}
        if self.partial is not None:
            options["partialFilterExpression"] = dict(self.partial)
        return pymongo.IndexModel(list(self.keys), **options)


def content_indexes(spec: str | None) -> list[IndexSpec]:
    """Indexes users declare for their content queries (``KINFLOW_CONTENT_INDEXES``).

    ``"_type,slug.current;_type,title"`` gives two ascending compound indexes.
    A GROQ filter such as ``_type == "article" && slug.current == $slug`` is
    pushed down as ``{_type, slug.current}`` equalities and uses the first.
    """
    specs = []
    for group in (spec or "").split(";"):
        paths = [p.strip() for p in group.split(",") if p.strip()]
        if paths:
            name = "content_" + "_".join(p.replace(".", "-") for p in paths)
            specs.append(IndexSpec(name, tuple((p, 1) for p in paths)))
    return specs


BASE_INDEXES: tuple[IndexSpec, ...] = (
    IndexSpec("type_id", (("_type", 1), ("_id", 1))),
    IndexSpec("type_updated", (("_type", 1), ("_updatedAt", 1))),
)
