"""The one text form of a moment, shared by the lake, the engine and the API.

Every stored timestamp is ISO-8601 in UTC with millisecond precision and a
``Z`` suffix, so stored strings compare in time order. One time-zone rule
holds both ways: a naive ``datetime`` or a text without an offset means UTC.
This module imports nothing of kinflow, so the pure core and the storage
layer can both use it.
"""

from __future__ import annotations

from datetime import UTC, datetime


def iso(moment: datetime) -> str:
    """``moment`` as stored: UTC, milliseconds, ``Z`` (naive means UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_iso(text: str) -> datetime:
    """An aware UTC ``datetime`` from a stored timestamp (no offset means UTC)."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
