"""Lake values made JSON-safe: one conversion for the API's JSON scalar and the CLI.

Lake documents may hold BSON types (datetimes, ObjectIds, binary) that a JSON
encoder refuses; the API and the command line convert them the same way, so a
value prints identically on the lake and through a server. A module of its own
(no GraphQL library) so the CLI can use it without loading the API schema.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kinflow.timestamps import iso


def jsonable(value: Any) -> Any:
    """A deep copy of ``value`` that any JSON encoder accepts (timestamps as stored:
    UTC, milliseconds, ``Z``; bytes as base64; anything else unknown as its text)."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return str(value)
