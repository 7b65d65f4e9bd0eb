"""Content reactions: tick the instances that read a document when it changes.

An instance's conditions read the lake documents its reference fields point
at (``subject``, ``doc.ref``, ``doc.refs``); every commit persists those
GDRs as the instance's ``watch`` list (indexed). This module follows the
process's change hub and, for each changed document, ticks the in-flight
instances watching it, so a gate that reads content reacts within about a
second instead of at the next heartbeat.

It owns only the routing. Ticks are idempotent and a tick that changes
nothing writes nothing, so a duplicate or stale event costs one indexed
query and no write. Engine-owned documents (``kinflow.*``) are skipped: an
instance's own commits must not tick it again; the follower tells the hub it
skips the engine's ids, so while it listens alone the lake leaves their
changes (every commit of every instance) out of the stream.
"""

from __future__ import annotations

import asyncio
import logging

from kinflow.core.context import Actor
from kinflow.core.owned import ENGINE_ID_PREFIXES
from kinflow.engine.facade import Engine
from kinflow.errors import KinflowError
from kinflow.storage.hub import ALL, ChangeHub

log = logging.getLogger("kinflow.engine.reactions")


def is_engine_document(document_type: object) -> bool:
    return isinstance(document_type, str) and document_type.startswith("kinflow.")


async def follow_content_changes(
    engine: Engine,
    hub: ChangeHub,
    *,
    actor: Actor | None = None,
    ready: asyncio.Event | None = None,
) -> None:
    """Run until cancelled: tick watchers of every changed content document."""
    actor = actor or Actor.system("content-reactions")
    # ids suffice (no lookups), and the engine's own documents need no reaction
    subscription = await hub.subscribe(ALL, documents=False, skip=ENGINE_ID_PREFIXES)
    if ready is not None:
        ready.set()
    try:
        async for event in subscription:
            if event.kind == "resync" or event.document_id is None:
                continue
            if event.document is not None and is_engine_document(event.document.get("_type")):
                continue
            if str(event.document_id).startswith(ENGINE_ID_PREFIXES):
                continue
            gdr = f"lake:{hub.dataset}:{event.document_id}"
            try:
                await engine.react_to_document_change(gdr, actor=actor)
            except KinflowError as exc:  # one failing tick must not stop the follower
                log.warning("tick after a change of %s failed: %s", gdr, exc)
    finally:
        subscription.close()
