"""A process-wide budget for the documents subscription snapshots hold in flight.

Every subscription starts with a snapshot: up to a thousand instance
documents for ``instancesChanged``, a whole family for ``familyChanged``.
Between the read and the moment the first frame has gone out, those
documents exist several times over (the lake's reply, the parsed documents,
the GraphQL result, its JSON), so a hundred subscriptions opened at once
could take the API past a gigabyte. The gate bounds that: a snapshot is
read only while fewer than ``max_documents`` documents are held by others
and one of ``READS_AT_ONCE`` read slots is free; the documents it read stay
counted until its first frame was sent. A snapshot that cannot be admitted
within ``wait`` seconds is refused ``too-many-streams``; the client retries.

The bound is ``max_documents`` plus what ``READS_AT_ONCE`` reads admitted
together return (docs/security.md, "Subscriptions and datasets").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from kinflow.errors import TooManyStreams

T = TypeVar("T")

#: snapshot reads in progress at once, whatever their size
READS_AT_ONCE = 4


class SnapshotGate:
    """Admission for snapshot reads, counted in documents held (one per API process)."""

    def __init__(self, max_documents: int, wait: float) -> None:
        self.max_documents = max(1, max_documents)
        self.wait = wait
        self.held = 0
        self._reads = asyncio.Semaphore(READS_AT_ONCE)
        self._freed = asyncio.Event()

    async def read(self, load: Callable[[Any], Awaitable[Sequence[T]]],
                   session: Any) -> Sequence[T]:  # fmt: skip
        """Run ``load`` once admitted; its documents count as held until :meth:`release`."""
        try:
            async with asyncio.timeout(self.wait):
                while self.held >= self.max_documents:
                    self._freed.clear()
                    await self._freed.wait()
                await self._reads.acquire()
        except TimeoutError:
            raise TooManyStreams(
                "too many subscription snapshots are being sent; try again shortly",
                limit="snapshot-documents", maxDocuments=self.max_documents,
                held=self.held) from None  # fmt: skip
        try:
            documents = await load(session)
            self.held += len(documents)
            return documents
        finally:
            self._reads.release()

    def release(self, count: int) -> None:
        """The snapshot's first frame went out (or it was abandoned): free its documents."""
        if count > 0:
            self.held = max(0, self.held - count)
            self._freed.set()
