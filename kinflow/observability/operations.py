"""The GraphQL operation hook: a strawberry extension, first in the schema's list.

Every operation (HTTP or websocket) gets a ``<type> <field>`` span (``query
instance``, ``mutation fireAction``) that the engine's spans nest under, one
count by root field, type and outcome code, and its execution time. The
label is the operation's first root field, checked against the schema (a
client's own operation name is free text, so it never becomes a label);
an operation refused before execution counts as ``invalid``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from graphql import FieldNode, OperationDefinitionNode
from opentelemetry.trace import SpanKind
from strawberry.extensions import SchemaExtension

from kinflow.observability import context, metrics, tracing
from kinflow.observability.switch import ON

INVALID = "invalid"


def root_field(execution_context: Any) -> str:
    """The operation's first root field, if the schema has it; else ``invalid``."""
    document = execution_context.graphql_document
    if document is None:
        return INVALID
    wanted = execution_context.operation_name
    for node in document.definitions:
        if not isinstance(node, OperationDefinitionNode):
            continue
        if wanted is not None and (node.name is None or node.name.value != wanted):
            continue
        first = node.selection_set.selections[0] if node.selection_set.selections else None
        if not isinstance(first, FieldNode):
            return INVALID
        name = first.name.value
        root = execution_context.schema._schema.get_root_type(node.operation)
        return name if root is not None and name in root.fields else INVALID
    return INVALID


def kind_of(execution_context: Any) -> str:
    try:
        return str(execution_context.operation_type.value)
    except Exception:  # no document, or no such operation in it
        return INVALID


def outcome_of(result: Any) -> str:
    errors = getattr(result, "errors", None)
    if not errors:
        return "ok"
    first = errors[0]
    code = (getattr(first, "extensions", None) or {}).get("code")
    if code is None:
        code = getattr(getattr(first, "original_error", None), "code", None)
    return str(code) if isinstance(code, str) and len(code) <= 64 else "error"


class OperationWatch(SchemaExtension):
    """Times, counts and traces each operation (docs/observability.md)."""

    def __init__(self) -> None:
        self.field = INVALID
        self.span: Any = None

    def on_operation(self) -> Iterator[None]:
        started = time.perf_counter()
        self.field = INVALID
        named = context.OPERATION.set(None)
        span_cm: Any = None
        if ON.tracing:
            span_cm = tracing.tracer().start_as_current_span("graphql", kind=SpanKind.SERVER)
            self.span = span_cm.__enter__()
        try:
            yield
        finally:
            context.OPERATION.reset(named)
            if ON.metrics or span_cm is not None:
                self._finished(started, span_cm)

    def _finished(self, started: float, span_cm: Any) -> None:
        kind = kind_of(self.execution_context)
        code = outcome_of(self.execution_context.result)
        if ON.metrics:
            metrics.child(metrics.OPERATIONS, self.field, kind, code).inc()
            metrics.child(metrics.OPERATION_SECONDS, self.field, kind).observe(
                time.perf_counter() - started)
        if span_cm is not None:
            self.span.update_name(f"{kind} {self.field}")
            self.span.set_attribute("graphql.operation.type", kind)
            self.span.set_attribute("kinflow.outcome", code)
            span_cm.__exit__(None, None, None)
            self.span = None

    def on_execute(self) -> Iterator[None]:
        self.field = root_field(self.execution_context)
        context.OPERATION.set(self.field)
        if self.span is not None:
            self.span.set_attribute("graphql.operation.name", self.field)
        yield
