"""``kinflow worker``: the heartbeat outside the API process, until SIGINT/SIGTERM.

A stop signal lets the current item finish for a few seconds, then cancels
the pass (every verb commits in one transaction; the next worker finishes
whatever was owed); the whole stop is bounded (``kinflow.cli.stopping``), and
a second signal exits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections import Counter
from types import SimpleNamespace

from kinflow.cli.stopping import arm_watchdog
from kinflow.engine import Engine
from kinflow.errors import LakeUnavailable
from kinflow.observability import configure as observe
from kinflow.observability import endpoint as metrics_endpoint
from kinflow.observability import logs
from kinflow.plugins import build_engine
from kinflow.schema.hubs import instance_topics
from kinflow.settings import Settings
from kinflow.storage import ChangeHub, keeper, open_lake
from kinflow.worker import Worker

log = logging.getLogger("kinflow.worker")
FINISH_SECONDS = 2.5  # the current item's time to finish after a stop signal


async def run_worker(*, once: bool, interval: float | None) -> str | None:
    settings = Settings()
    observe(settings, os.environ)  # metrics on KINFLOW_METRICS_PORT, traces, JSON logs
    logs.configure(settings.log_format)
    connection = await open_lake(settings)
    hub = ChangeHub(connection.lake, topic_functions=[instance_topics])
    metrics = contextlib.AsyncExitStack()
    try:
        engine: Engine = build_engine(connection.lake, settings)
        await metrics.enter_async_context(metrics_endpoint.serving(
            settings, connection, None, engine, SimpleNamespace()))
        if once:
            report = await Worker(engine, retention_days=settings.retention_days,
                                  concurrency=settings.worker_concurrency).run_pass()
            counts = Counter(kind for kind, _ in report.processed)
            done = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "nothing"
            purged = report.purged.roots if report.purged else 0
            return (f"one pass: {done}; {report.skipped} skipped, {len(report.failed)} failed, "
                    f"{len(report.parked)} parked, {purged} families purged")
        stop = _stop_on_signals()
        worker = Worker(engine, hub=hub, interval=interval or settings.worker_interval,
                        retention_days=settings.retention_days,
                        concurrency=settings.worker_concurrency)
        task = asyncio.create_task(_run(worker, hub, stop, settings.log_format), name="worker")
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not task.done():
            finished, _ = await asyncio.wait({task}, timeout=FINISH_SECONDS)
            if not finished:
                log.warning("the worker was still busy %.0f s after the stop signal; "
                            "cancelling it", FINISH_SECONDS)  # fmt: skip
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)
        elif not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    finally:
        await metrics.aclose()
        await hub.stop(timeout=1.5)
        await connection.close()
    if keeper.fatal_error:
        raise LakeUnavailable(keeper.fatal_error)
    return None


async def _run(worker: Worker, hub: ChangeHub, stop: asyncio.Event, log_format: str) -> None:
    await hub.start()
    await worker.ensure_ready()
    logs.announce(log_format, f"kinflow worker {worker.worker_id} running "
                  "(stop with Ctrl-C)", lambda line: print(line, file=sys.stderr, flush=True))
    await worker.run(stop)


def _stop_on_signals() -> asyncio.Event:
    """An event set by the first SIGINT/SIGTERM (which also arms the watchdog)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():
            log.error("a second stop signal: exiting now")
            os._exit(1)
        arm_watchdog()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, on_signal)
    return stop
