"""How failures reach API clients.

Every ``KinflowError`` (engine refusals, GROQ errors, auth) becomes a GraphQL
error whose ``extensions`` carry its stable ``code`` and ``details``. The
safety limits become ``query-too-complex``. Anything else is a bug: the client
sees "Internal error" with an ``errorId``, and the traceback is logged under
that id, so a report from a user can be matched to the log line.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator
from typing import Any

from graphql import ExecutionResult as GraphQLExecutionResult
from graphql import GraphQLError
from strawberry.extensions import SchemaExtension
from strawberry.types.execution import ExecutionResult

from kinflow.errors import KinflowError
from kinflow.schema.scalars import jsonable
from kinflow.storage.lake import unavailable

log = logging.getLogger("kinflow.api")

QUERY_TOO_COMPLEX = "query-too-complex"
INTERNAL = "internal-error"
_LIMIT_MESSAGES = (
    re.compile(r"exceeds maximum operation depth of (?P<limit>\d+)"),
    re.compile(r"(?P<found>\d+) aliases found\. Allowed: (?P<limit>\d+)"),
    re.compile(r"Document contains more than (?P<limit>\d+) tokens"),
)
_LIMIT_NAMES = ("depth", "aliases", "tokens")


class SubscriptionLagged(KinflowError):
    """The subscriber fell too far behind; it must resubscribe for a fresh snapshot."""

    code = "subscription-lagged"


def _limit_error(error: GraphQLError) -> GraphQLError | None:
    for name, pattern in zip(_LIMIT_NAMES, _LIMIT_MESSAGES, strict=True):
        match = pattern.search(error.message)
        if match:
            details: dict[str, Any] = {"limit": name, "max": int(match["limit"])}
            if "found" in match.groupdict():
                details["found"] = int(match["found"])
            return _with_extensions(error, error.message, QUERY_TOO_COMPLEX, details)
    return None


def _with_extensions(
    error: GraphQLError, message: str, code: str, details: dict[str, Any], **extra: Any
) -> GraphQLError:
    return GraphQLError(
        message,
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        original_error=None,
        extensions={"code": code, "details": jsonable(details), **extra},
    )


def shape_error(error: GraphQLError) -> GraphQLError:
    """The client-facing form of one error."""
    original = error.original_error
    if original is not None and not isinstance(original, KinflowError):
        # a lake that did not answer, reached past the lake's own mapping
        original = unavailable(original, "operation") or original
    if isinstance(original, KinflowError):
        return _with_extensions(error, original.message, original.code, original.details)
    if original is None or isinstance(original, GraphQLError):
        if error.extensions and "code" in error.extensions:
            return error
        return _limit_error(error) or error
    error_id = uuid.uuid4().hex[:16]
    log.error(
        "internal error %s at %s: %s", error_id, ".".join(map(str, error.path or ())), original,
        exc_info=(type(original), original, original.__traceback__),
    )
    return _with_extensions(
        error, f"Internal error (id {error_id}); it has been logged.", INTERNAL, {},
        errorId=error_id,
    )


class ErrorShaping(SchemaExtension):
    """Rewrites every result's errors with ``shape_error`` (operations and stream frames)."""

    def __init__(self) -> None:
        self._streamed = False

    def _shape(self, result: object) -> None:
        errors = getattr(result, "errors", None)
        if errors:
            result.errors = [shape_error(e) for e in errors]  # type: ignore[attr-defined]

    def on_operation(self) -> Iterator[None]:
        self._streamed = False
        yield
        if self._streamed:
            return
        result = self.execution_context.result
        if isinstance(result, GraphQLExecutionResult | ExecutionResult):
            self._shape(result)

    def on_stream_result(self, result: Any) -> Iterator[None]:
        self._streamed = True
        self._shape(result)
        yield None
