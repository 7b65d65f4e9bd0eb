"""What a windowed cohort benchmark needs: fire only children that exist, and watch the window.

With ``maxActive`` most rows start queued and have no child document, so the
firing loop cannot take every child id from the rows at spawn. ``feed_started``
polls the lake for the cohort's live children (the ``instance_children``
index, partial on ``_type``: parent and ``completedAt``) and queues each one
once, in ``forEach`` order, only when the callers are about to run dry (and at
most every 50 ms while nothing new started), so the polls cost the lake little;
the time they took is reported beside the figures. ``ActiveSampler`` counts
the live children every ~0.5 s from the child documents themselves (queued
rows have none), which is what ``active <= maxActive`` is about.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from pymongo import AsyncMongoClient

STALL_SECONDS = 60.0  # no new child for this long: the window stopped refilling


def live_filter(parent_id: str) -> dict[str, Any]:
    """The engine's own shape (``live_children_filter``): ``_type`` lets the lake use the
    partial index; without it each poll scanned the collection (~30 ms at N = 300)."""
    return {"_type": "kinflow.instance", "parentInstance": parent_id, "completedAt": None}


@dataclass
class FeedReport:
    fed: int = 0
    polls: int = 0
    poll_seconds: float = 0.0  # wall time the polls took (the bench's own load on the lake)
    stalled: bool = False


async def feed_started(lake: AsyncMongoClient[dict[str, Any]], parent_id: str,
                       order: dict[str, int], children: asyncio.Queue[str | None],
                       callers: int) -> FeedReport:
    """Queue every child of the cohort once it exists; then one ``None`` per caller."""
    report, seen = FeedReport(), set[str]()
    production = lake.kinflow.production
    last_new = time.monotonic()
    while len(seen) < len(order):
        if children.qsize() >= callers:
            await asyncio.sleep(0.01)
            continue
        report.polls += 1
        began = time.perf_counter()
        found = [str(d["_id"]) async for d in production.find(live_filter(parent_id), {"_id": 1})]
        report.poll_seconds += time.perf_counter() - began
        fresh = sorted((c for c in found if c not in seen and c in order), key=order.__getitem__)
        for child in fresh:
            seen.add(child)
            children.put_nowait(child)
        if fresh:
            last_new = time.monotonic()
        elif time.monotonic() - last_new > STALL_SECONDS:
            report.stalled = True
            break
        else:
            await asyncio.sleep(0.05)
    report.fed = len(seen)
    for _ in range(callers):
        children.put_nowait(None)
    return report


class ActiveSampler:
    """The most live children seen at any sample, read from the lake every ``interval``."""

    def __init__(self, lake: AsyncMongoClient[dict[str, Any]], parent_id: str,
                 interval: float = 0.5) -> None:
        self.lake, self.parent_id, self.interval = lake, parent_id, interval
        self.peak = 0
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    async def sample(self) -> int:
        live = await self.lake.kinflow.production.count_documents(live_filter(self.parent_id))
        self.peak = max(self.peak, live)
        self.samples += 1
        return live

    async def _run(self) -> None:
        while True:
            await self.sample()
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.sample()  # one last look once the cohort completed
