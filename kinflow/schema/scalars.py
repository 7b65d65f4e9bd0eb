"""The two custom scalars of the contract, and JSON-safety for lake values.

``JSON`` is Strawberry's own arbitrary-JSON scalar. ``DateTime`` is an
ISO-8601 UTC string: the engine already stores timestamps that way, so the
scalar passes strings through and only formats real ``datetime`` values.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NewType

import strawberry
from strawberry.scalars import JSON
from strawberry.types.scalar import ScalarDefinition

from kinflow.errors import InvalidInput
from kinflow.jsonvalues import jsonable  # lake values -> JSON (shared with the CLI)

__all__ = ["JSON", "SCALAR_MAP", "DateTime", "jsonable"]


def _serialize_datetime(value: Any) -> str:
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        moment = moment.astimezone(UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    return str(value)


def _parse_datetime(value: Any) -> str:
    """An input DateTime; anything else is ``invalid-input`` (a ValueError here surfaced as an
    internal error once an input took a DateTime: purgeInstances' finishedBefore)."""
    try:
        if not isinstance(value, str):
            raise ValueError("not a string")
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInput("DateTime must be an ISO-8601 timestamp, e.g. "
                           "2026-01-01T12:00:00.000Z", got=str(value)[:64]) from exc
    return value


if TYPE_CHECKING:
    DateTime = str
else:
    DateTime = NewType("DateTime", str)

DATETIME_SCALAR = strawberry.scalar(
    name="DateTime",
    description="An ISO-8601 timestamp in UTC, e.g. 2026-01-01T12:00:00.000Z.",
    serialize=_serialize_datetime,
    parse_value=_parse_datetime,
)
SCALAR_MAP: dict[object, ScalarDefinition] = {DateTime: DATETIME_SCALAR}
