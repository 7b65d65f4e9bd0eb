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

A caller may choose an instance id (``startInstance``), but never one of the
shape the engine derives for children (``derived_child``): a queued row's
child id and the ids of a row's later attempts are known before the child
exists, and a caller who took one first would stop that child from ever
being created. The shape is checked on the id alone, so the check needs no
read and cannot race the engine.
"""

from __future__ import annotations

import re
from typing import Any

from kinflow.core.errors import InstanceIdReserved, ReservedId, ReservedType

INSTANCE_PREFIX = "instance."
ENGINE_ID_PREFIXES = (INSTANCE_PREFIX, "definition.", "lease.")
ENGINE_TYPE_PREFIX = "kinflow."
CHILD_PREFIX = INSTANCE_PREFIX + "c"  # children: CHILD_PREFIX + CHILD_HASH_DIGITS hex digits
CHILD_HASH_DIGITS = 24
# every id the engine derives for a child starts so (later suffixes: ``-<n>``, ``-a<n>``);
# a root the engine mints is ``instance.<ULID>``, whose first character is a digit
_DERIVED_CHILD = re.compile(re.escape(CHILD_PREFIX) + f"[0-9a-f]{{{CHILD_HASH_DIGITS}}}")


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


def derived_child(doc_id: Any) -> bool:
    """Whether ``doc_id`` has the shape of an id the engine derives for a child."""
    return isinstance(doc_id, str) and _DERIVED_CHILD.match(doc_id) is not None


def check_instance_id(doc_id: str) -> str:
    """A caller-chosen instance id may take neither another kind of engine id nor the
    shape of a child's (``instance-id-reserved``)."""
    if derived_child(doc_id):
        raise InstanceIdReserved(
            f"ids starting with {CHILD_PREFIX!r} and {CHILD_HASH_DIGITS} hex digits are the "
            "ones the engine derives for children; choose another instance id",
            id=doc_id, prefix=CHILD_PREFIX,
        )
    prefix = owned_prefix(doc_id)
    if prefix is not None and prefix != INSTANCE_PREFIX:
        raise ReservedId(
            f"ids starting with {prefix!r} belong to the engine; an instance id may not use it",
            id=doc_id, prefix=prefix,
        )
    return doc_id
