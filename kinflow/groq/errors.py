"""The GROQ error classes: every refusal from parse or evaluate is one of these.

Owns the caret rendering of syntax errors. Codes are a contract with API clients
(``groq-syntax`` for anything found before evaluation starts, ``groq-error`` and
``groq-type-error`` for evaluation time, ``groq-limit-exceeded`` when a budget ran
out); messages are for humans.
"""

from __future__ import annotations

from typing import Any

from kinflow.errors import KinflowError


class GroqError(KinflowError):
    """Base of every GROQ refusal, parse-time or evaluation-time."""

    code = "groq-error"


class GroqTypeError(GroqError):
    """An evaluation-time refusal caused by a value of the wrong type given by the caller."""

    code = "groq-type-error"


class GroqLimitExceeded(GroqError):
    """The query passed a bound: ``details.limit`` is ``time`` or ``documents-scanned``."""

    code = "groq-limit-exceeded"


class GroqCancelled(GroqError):
    """Nobody awaits the result any more (the client went away); never shown to one."""

    code = "groq-cancelled"


class GroqSyntaxError(GroqError):
    """The query does not parse or fails validation; ``position`` is a 0-based offset."""

    code = "groq-syntax"

    def __init__(self, reason: str, query: str, position: int, **details: Any) -> None:
        position = max(0, min(position, len(query)))
        super().__init__(_render(reason, query, position), position=position, reason=reason,
                         **details)
        self.reason = reason
        self.query = query
        self.position = position


def _render(reason: str, query: str, position: int) -> str:
    """Message with the offending line and a caret under ``position``."""
    start = query.rfind("\n", 0, position) + 1
    end = query.find("\n", position)
    if end < 0:
        end = len(query)
    line = query[start:end]
    line_no = query.count("\n", 0, position) + 1
    column = position - start
    where = f"line {line_no}, column {column + 1}"
    return f"{reason} at {where}\n  {line}\n  {' ' * column}^"
