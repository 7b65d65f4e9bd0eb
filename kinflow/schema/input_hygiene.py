"""Refuse request values that no store or JSON encoder accepts, before anything runs.

Two kinds of value pass GraphQL's own validation and then fail deep inside a
resolver: a lone UTF-16 surrogate in a variable (``"\\ud800"`` is a legal
JSON escape but has no UTF-8 form, so the lake's BSON encoder raises
mid-verb; graphql-core already refuses one in the query text), and the
non-finite numbers that Python's JSON parser accepts in variables (``NaN``,
``Infinity``) or that a literal such as ``1e999`` becomes; stored, those are
echoed back as invalid JSON. Both are checked once per operation over the
document's literals and the variables, so every argument of every field is
covered with no per-field hook, and the caller gets ``invalid-input`` naming
where the value was.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterator
from typing import Any

from graphql import ExecutionResult, GraphQLError
from graphql.language import DocumentNode, FloatValueNode, Node, StringValueNode
from strawberry.extensions import SchemaExtension

from kinflow.errors import InvalidInput


def encodable(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def value_problem(value: Any, where: str) -> str | None:
    """Where in a JSON-like ``value`` the first unstorable part is, else ``None``."""
    if isinstance(value, str):
        return None if encodable(value) else f"{where}: a string with a lone surrogate"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where}: a number that is not finite"
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not encodable(key):
                return f"{where}: a key with a lone surrogate"
            problem = value_problem(item, f"{where}.{key}")
            if problem:
                return problem
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            problem = value_problem(item, f"{where}[{index}]")
            if problem:
                return problem
    return None


def _literal_nodes(node: Node) -> Iterator[Node]:
    """Every string and float literal below ``node`` (the only literals that can be unstorable)."""
    stack: list[Any] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, StringValueNode | FloatValueNode):
            yield current
            continue
        for key in current.keys:
            child = getattr(current, key, None)
            if isinstance(child, Node):
                stack.append(child)
            elif isinstance(child, tuple | list):
                stack.extend(item for item in child if isinstance(item, Node))


def document_problem(document: DocumentNode) -> str | None:
    """The first unstorable literal of a parsed operation, else ``None``."""
    for node in _literal_nodes(document):
        if isinstance(node, StringValueNode) and not encodable(node.value):
            return "a string literal with a lone surrogate"
        if isinstance(node, FloatValueNode) and not math.isfinite(float(node.value)):
            return f"the number literal {node.value[:32]} is not finite"
    return None


# a document's verdict, by identity while it lives: a cached operation text's document
# (schema/caching.py) is walked once, not on every request that sends the text
_verdicts: dict[int, tuple[weakref.ref[DocumentNode], str | None]] = {}


def checked_document(document: DocumentNode) -> str | None:
    """``document_problem``, remembered for ``document`` while it is alive."""
    key = id(document)
    found = _verdicts.get(key)
    if found is not None and found[0]() is document:
        return found[1]
    problem = document_problem(document)
    _verdicts[key] = (weakref.ref(document, lambda _: _verdicts.pop(key, None)), problem)
    return problem


def request_problem(query: str | None, document: DocumentNode | None,
                    variables: dict[str, Any] | None) -> str | None:  # fmt: skip
    """Why an operation's inputs cannot be stored or echoed, else ``None``."""
    if query is not None and not encodable(query):
        return "the query text holds a lone surrogate"
    if document is not None:
        problem = checked_document(document)
        if problem:
            return problem
    return value_problem(variables or {}, "variables")


class InputHygiene(SchemaExtension):
    """Answers ``invalid-input`` instead of executing an operation with unstorable inputs."""

    def on_execute(self) -> Iterator[None]:
        context = self.execution_context
        problem = request_problem(context.query, context.graphql_document, context.variables)
        if problem is not None:
            error = InvalidInput("inputs must be valid UTF-8 text and finite numbers",
                                 problem=problem)  # fmt: skip
            context.result = ExecutionResult(
                data=None, errors=[GraphQLError(error.message, original_error=error)])
        yield
