"""The instance-size guard: no commit may push an instance toward MongoDB's 16 MB.

An instance is one document; past 16 MB every write to it fails, ``abort``
included, and a parent's cascade into it stops half-way. So each commit is
checked before its write, inside its transaction (a refusal writes nothing):

* a caller's verb (and its first hop) may not leave the document over
  ``Limits.instance_bytes`` (``KINFLOW_MAX_INSTANCE_BYTES``, 12 MB by default),
  and must leave room below ``ENGINE_CEILING`` for what its live children
  will still add (``RESOLUTION_BYTES`` per live row: the abort mark, the
  resolved stamp and its history row, measured at about 470 bytes);
* the engine's own later commits (cascade hops, stamps, claims) may go past
  the caller's limit, up to ``ENGINE_CEILING``, so a cascade a verb started
  (a cohort resolving, an abort draining) still finishes;
* an abort is never refused: it writes a few hundred bytes plus its rows'
  marks, which the reserve above has kept room for.

The check is cheap in the common case: the loaded document's size is
estimated from the JSON text the commit already made of it, plus the encoded
size of the update about to be sent. Only when that estimate passes the limit
is the whole document encoded and measured exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import bson

from kinflow.core.errors import InstanceTooLarge
from kinflow.core.mutation import Mutation
from kinflow.core.sizes import ENGINE_CEILING as ENGINE_CEILING
from kinflow.core.sizes import MONGODB_LIMIT as MONGODB_LIMIT
from kinflow.core.sizes import RESOLUTION_BYTES as RESOLUTION_BYTES
from kinflow.core.sizes import engine_limit


def encoded_size(value: Mapping[str, Any]) -> int:
    return len(bson.encode(value))


def check_write(mutation: Mutation, document: Mapping[str, Any],
                update: Mapping[str, Any] | None) -> None:
    """Refuse the write (``instance-too-large``) if it would leave ``document`` too big.

    ``update`` is the targeted update about to be applied to the loaded
    document, or ``None`` when ``document`` is written whole.
    """
    limit = mutation.size_limit
    if limit is None:
        return
    reserve, ceiling = mutation.size_reserve, engine_limit(limit)

    def fits(size: int) -> bool:
        return size <= limit and size + reserve <= ceiling

    if update is not None and mutation.before_bytes is not None:
        if fits(mutation.before_bytes + encoded_size(update)):
            return
    size = encoded_size(document)
    if not fits(size):
        raise InstanceTooLarge(
            f"instance {mutation.instance.id_!r} would be {size} bytes; the limit is {limit}"
            + (f" (and {reserve} bytes kept free for its live children)" if reserve else ""),
            instanceId=mutation.instance.id_, size=size, limit=limit, reserved=reserve,
            setting="KINFLOW_MAX_INSTANCE_BYTES",
        )
