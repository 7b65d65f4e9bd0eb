"""Stopping the API process promptly: every subscription, every stream, the worker.

uvicorn runs the lifespan's shutdown once the connections are closed. From
there the process must let go within seconds, however many subscribers and
change streams it holds and even when the lake has stopped answering;
otherwise it sits in "Waiting for application shutdown" until it is killed.
So the hubs close all their streams at once, each close bounded, while the
worker finishes its current item; a worker still busy after the grace period
is cancelled (every verb commits in one transaction, and the heartbeat of the
next process finishes whatever was owed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kinflow.schema.hubs import Hubs

log = logging.getLogger("kinflow.api")
GRACE_SECONDS = 5.0


async def stop_bounded(
    hubs: Hubs, worker: asyncio.Task[None] | None, *, grace: float = GRACE_SECONDS
) -> None:
    """Stop the hubs and wait for ``worker`` (already told to stop), neither past ``grace``."""
    began = time.monotonic()
    streams = hubs.stream_count()
    closing = asyncio.create_task(hubs.stop(), name="hubs-stop")
    if worker is not None:
        await _finish(worker, grace)
    done, _ = await asyncio.wait({closing}, timeout=grace)
    if not done:
        log.warning("change streams still closing after %.1f s; leaving them to the client",
                    grace)  # fmt: skip
    log.info("stopped %d change stream(s) and the worker in %.2f s", streams,
             time.monotonic() - began)  # fmt: skip


async def _finish(worker: asyncio.Task[None], grace: float) -> None:
    done, _ = await asyncio.wait({worker}, timeout=grace)
    if not done:
        log.warning("the worker was still busy %.1f s after shutdown began; cancelling it",
                    grace)  # fmt: skip
        worker.cancel()
        await asyncio.wait({worker}, timeout=grace)
        return
    if not worker.cancelled() and worker.exception() is not None:
        log.error("the worker failed", exc_info=worker.exception())
