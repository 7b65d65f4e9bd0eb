"""Per-process caches for parsing and validating operation texts.

Clients send the same few operation texts over and over (a frontend's
``fireAction``, a poller's ``instance``); parsing and validating them cost
more of an API request's CPU than the engine's planning (docs/performance.md).
Both steps depend only on the text and the schema (the limit rules are fixed
per schema), so a text that parsed and validated cleanly once is not checked
again. Only clean results are kept: an invalid text is validated (and
refused) on every request. Both caches are bounded LRUs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, cast

from graphql import DocumentNode
from strawberry.extensions import SchemaExtension

CACHED_TEXTS = 256  # distinct operation texts remembered per schema


class _Clean:
    """Operation texts that parsed and validated cleanly, with their documents (an LRU)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.documents: OrderedDict[str, DocumentNode] = OrderedDict()

    def get(self, text: str) -> DocumentNode | None:
        document = self.documents.get(text)
        if document is not None:
            self.documents.move_to_end(text)
        return document

    def add(self, text: str, document: DocumentNode) -> None:
        self.documents[text] = document
        if len(self.documents) > self.size:
            self.documents.popitem(last=False)


def _clean(schema: Any) -> _Clean:
    # kept on the schema itself: another schema (other limits) has its own
    found = getattr(schema, "_kinflow_clean_operations", None)
    if found is None:
        found = _Clean(CACHED_TEXTS)
        schema._kinflow_clean_operations = found
    return cast(_Clean, found)


class CleanOperations(SchemaExtension):
    """Parse and validate an operation text once; reuse its document while it is remembered.

    A text not remembered goes through strawberry's own parsing and validation
    (limits and error shaping included) and is remembered only if both were clean.
    """

    def on_parse(self) -> Iterator[None]:
        context = self.execution_context
        if context.query and context.graphql_document is None:
            document = _clean(context.schema).get(context.query)
            if document is not None:
                context.graphql_document = document  # strawberry then skips its parse
        yield

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        text = context.query
        clean = _clean(context.schema)
        if text and clean.get(text) is context.graphql_document is not None:
            context.pre_execution_errors = []  # strawberry then skips its validation
            yield
            return
        yield
        if text and context.graphql_document is not None and context.pre_execution_errors == []:
            clean.add(text, context.graphql_document)


def caching_extensions() -> list[Callable[[], SchemaExtension]]:
    """Extension factories, placed after the limiters (their rules run on a first sight)."""
    return [CleanOperations]
