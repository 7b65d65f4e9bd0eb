"""A parent and its direct children, kept current from change events (pure).

The child subscriptions (``childChanged``, ``childCompleted``,
``cohortChanged``) watch one ``family:<parentId>`` topic: the parent's own
changes carry its registry (new rows, stamps, condemnations) and the
children's changes carry their live status. ``Family`` folds both into rows:
the parent's registry row, overlaid with the child document when the child
has committed something the parent has not stamped yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kinflow.core.cohort.registry import Row, overlay
from kinflow.engine.registry_cache import registry_rows
from kinflow.schema.loaders import Doc, parent_id


@dataclass
class Family:
    parent_id: str
    parent: Doc | None = None
    registry: dict[str, Row] = field(default_factory=dict)
    children: dict[str, Doc] = field(default_factory=dict)

    def load(self, documents: Iterable[Mapping[str, Any]]) -> None:
        """Fold in the snapshot (the parent and its direct children)."""
        for doc in documents:
            self._put(dict(doc))

    def _put(self, doc: Doc) -> set[str]:
        if doc.get("_id") == self.parent_id:
            self.parent = doc
            self.registry = {row.child_id: row for row in registry_rows(doc)}
            return set(self.registry)
        if parent_id(doc) == self.parent_id:
            self.children[doc["_id"]] = doc
            return {doc["_id"]}
        return set()

    def apply(self, kind: str, document_id: Any, document: Mapping[str, Any] | None) -> set[str]:
        """Fold in one change; return the child ids whose rows may have changed."""
        if kind == "delete":
            if document_id == self.parent_id:
                self.parent = None
                self.registry = {}
                return set()
            if isinstance(document_id, str) and document_id in self.children:
                del self.children[document_id]
                return {document_id}
            return set()
        if document is None:
            return set()
        return self._put(dict(document))

    def row(self, child_id: str) -> Row | None:
        found = self.registry.get(child_id)
        return overlay(found, self.children.get(child_id)) if found is not None else None

    def rows(self) -> list[Row]:
        return [overlay(r, self.children.get(r.child_id)) for r in self.registry.values()]

    def changed_at(self, child_id: str) -> str:
        doc = self.children.get(child_id) or self.parent or {}
        return str(doc.get("_updatedAt") or doc.get("lastChangedAt") or "")
