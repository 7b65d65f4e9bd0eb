"""Document bookkeeping the lake maintains on every write.

Every stored document carries ``_id``, ``_type``, ``_rev`` (a fresh token per
write, the fence for optimistic concurrency), ``_createdAt`` and
``_updatedAt`` (ISO-8601 UTC strings with milliseconds, so GROQ sees them as
its datetimes sort). Callers never set these; the lake does.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

from kinflow.errors import InvalidInput
from kinflow.timestamps import iso

SYSTEM_KEYS = ("_id", "_type", "_rev", "_createdAt", "_updatedAt")


def new_rev() -> str:
    return secrets.token_hex(8)


def utcnow() -> datetime:
    return datetime.now(UTC)


def check_new_document(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise InvalidInput("a document must be an object", got=type(doc).__name__)
    doc_id = doc.get("_id")
    if not isinstance(doc_id, str) or not doc_id:
        raise InvalidInput("a document needs a non-empty string '_id'", field="_id")
    doc_type = doc.get("_type")
    if not isinstance(doc_type, str) or not doc_type:
        raise InvalidInput("a document needs a non-empty string '_type'", field="_type", id=doc_id)
    return doc


def stamp_created(doc: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A copy of ``doc`` with fresh system fields for a create."""
    stamp = iso(now)
    body = {k: v for k, v in doc.items() if k not in ("_rev", "_createdAt", "_updatedAt")}
    return {**body, "_rev": new_rev(), "_createdAt": stamp, "_updatedAt": stamp}


def stamp_replaced(doc: dict[str, Any], created_at: str | None, now: datetime) -> dict[str, Any]:
    stamp = iso(now)
    body = {k: v for k, v in doc.items() if k not in ("_rev", "_createdAt", "_updatedAt")}
    return {**body, "_rev": new_rev(), "_createdAt": created_at or stamp, "_updatedAt": stamp}
