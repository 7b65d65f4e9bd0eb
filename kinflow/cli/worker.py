"""``kinflow worker``: the heartbeat outside the API process, until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections import Counter

from kinflow.engine import Engine
from kinflow.plugins import build_engine
from kinflow.schema.hubs import instance_topics
from kinflow.settings import Settings
from kinflow.storage import ChangeHub, open_lake
from kinflow.worker import Worker


async def run_worker(*, once: bool, interval: float | None) -> str | None:
    settings = Settings()
    connection = await open_lake(settings)
    hub = ChangeHub(connection.lake, topic_functions=[instance_topics])
    try:
        engine: Engine = build_engine(connection.lake, settings)
        if once:
            report = await Worker(engine).run_pass()
            counts = Counter(kind for kind, _ in report.processed)
            done = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "nothing"
            return f"one pass: {done}; {report.skipped} skipped, {len(report.failed)} failed"
        await hub.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        worker = Worker(engine, hub=hub, interval=interval or settings.worker_interval)
        await worker.run(stop)
        return None
    finally:
        await hub.stop()
        await connection.close()
