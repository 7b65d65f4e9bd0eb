"""Engine-owned documents: the ids and types a content write may never touch.

The engine keeps its bookkeeping in the lake: instances (``instance.<ULID>``,
children ``instance.c<hash>``), definitions (``definition.<name>.v<n>``) and
the heartbeat's leases (``lease.<kind>.<instance>``), all typed ``kinflow.*``.
A content write that could create, replace or delete one of those ids lets an
operator squat it: the next deploy of that version fails with
``document-exists``, and a squatted lease stops the heartbeat from ever
handling its instance. So the id decides, whatever ``_type`` the write
claims, and engine types are refused whatever the id.

``check_content_write`` is the one check every content write path calls
(``putDocument``, ``deleteDocument``); it holds for any dataset, so it stays
true when bookkeeping moves out of the content dataset.
"""

from __future__ import annotations

from typing import Any

from kinflow.core.errors import ReservedId, ReservedType

INSTANCE_PREFIX = "instance."
ENGINE_ID_PREFIXES = (INSTANCE_PREFIX, "definition.", "lease.")
ENGINE_TYPE_PREFIX = "kinflow."


def owned_prefix(doc_id: Any) -> str | None:
    """The engine prefix ``doc_id`` starts with, if any."""
    if isinstance(doc_id, str):
        for prefix in ENGINE_ID_PREFIXES:
            if doc_id.startswith(prefix):
                return prefix
    return None


def check_content_write(doc_id: Any, doc_type: Any = None, *, stored_type: Any = None) -> None:
    """Refuse a content write to an engine-owned id (``reserved-id``) or type (``reserved-type``).

    ``doc_type`` is the type the write carries, ``stored_type`` the type of the
    document it would replace or delete.
    """
    prefix = owned_prefix(doc_id)
    if prefix is not None:
        raise ReservedId(
            f"ids starting with {prefix!r} belong to the engine; use its verbs",
            id=doc_id, prefix=prefix,
        )
    for found in (doc_type, stored_type):
        if isinstance(found, str) and found.startswith(ENGINE_TYPE_PREFIX):
            raise ReservedType(
                f"documents of type {found!r} belong to the engine; use its verbs",
                type=found,
            )


def check_instance_id(doc_id: str) -> str:
    """A caller-chosen instance id may not take another kind of engine id."""
    prefix = owned_prefix(doc_id)
    if prefix is not None and prefix != INSTANCE_PREFIX:
        raise ReservedId(
            f"ids starting with {prefix!r} belong to the engine; an instance id may not use it",
            id=doc_id, prefix=prefix,
        )
    return doc_id
