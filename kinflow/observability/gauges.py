"""What ``/metrics`` reads when it is scraped: the hub, the embedded lake, cohorts, backlog.

``Watched`` holds what one running app exposes (its lake connection, hubs and
engine). Hub and process figures are read as they are at collection. Cohort
aggregates and the heartbeat backlog need the lake: ``refresh`` reads them
(the open parents' per-cohort tallies and the backlog kinds, never a
registry row, each through a partial index of engine/indexes.py and capped)
at most every ``REFRESH_SECONDS``, before the scrape is rendered.
Labels are statuses and kinds, never an instance id.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kinflow.core.owing import ANY_OWED, FIELD, FLAGS, holds
from kinflow.core.state import INSTANCE_TYPE
from kinflow.observability.metrics import REGISTRY
from kinflow.storage.database import side_name
from kinflow.storage.memory_guard import rss_mib
from kinflow.timestamps import iso

log = logging.getLogger("kinflow.observability")
REFRESH_SECONDS = 5.0
REFRESH_TIMEOUT = 2.0
OPEN_PARENTS = 1000  # unfinished parents whose cohort tallies one refresh reads at most
# served by instance_cohort_parents (engine/indexes.py)
OPEN_PARENTS_QUERY = {"_type": INSTANCE_TYPE, "completedAt": None, "rowCount": {"$gt": 0}}
BACKLOG_CAP = 10_000  # documents one backlog kind reads at most (the gauge saturates there)
_STATUS = re.compile(r"^[a-z][a-zA-Z-]{0,23}$")
_MAX_STATUSES = 16


@dataclass
class Watched:
    """One running app's parts, as ``/metrics`` reads them."""

    connection: Any  # storage.connect.LakeConnection
    hubs: Any  # schema.hubs.Hubs, or None (``kinflow worker``)
    engine: Any  # engine.Engine
    rows: dict[str, int] = field(default_factory=dict)
    cohorts: int = 0
    paused: int = 0
    backlog: dict[str, int] = field(default_factory=dict)
    read_at: float = 0.0
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def refresh(self) -> None:
        """Read the lake-side figures again if the last read is older than ``REFRESH_SECONDS``."""
        async with self._lock:
            if time.monotonic() - self.read_at < REFRESH_SECONDS:
                return
            self.read_at = time.monotonic()
            try:
                async with asyncio.timeout(REFRESH_TIMEOUT):
                    await self._read_cohorts()
                    await self._read_backlog()
            except Exception as exc:  # a scrape still answers with what it has
                log.warning("metrics: reading cohort figures failed (%s)", type(exc).__name__)

    async def _read_cohorts(self) -> None:
        lake, dataset = self.engine.lake, self.engine.dataset
        parents = await lake.find(
            OPEN_PARENTS_QUERY, dataset=dataset, projection={"cohortRows": 1, "cohorts": 1},
            limit=OPEN_PARENTS)
        rows: Counter[str] = Counter()
        cohorts = paused = 0
        for parent in parents:
            for entry in parent.get("cohortRows") or ():
                cohorts += 1
                for pair, count in (entry.get("counts") or {}).items():
                    status = str(pair).split(":", 1)[0]
                    if isinstance(count, int) and _STATUS.match(status) and (
                            status in rows or len(rows) < _MAX_STATUSES):
                        rows[status] += count
            paused += sum(1 for window in parent.get("cohorts") or ()
                          if isinstance(window, dict) and window.get("pausedAt"))
        self.rows, self.cohorts, self.paused = dict(rows), cohorts, paused

    async def _read_backlog(self) -> None:
        """Each kind read through its partial index (engine/indexes.py), at most ``BACKLOG_CAP``
        documents a kind: a count command or an aggregate's count would read more than the
        index on the embedded lake, and a completed instance's due time is dropped here."""
        lake, dataset = self.engine.lake, self.engine.dataset
        found: dict[str, list[Any]] = {}
        for kind, (side, filter_, projection) in backlog_queries(iso(datetime.now(UTC))).items():
            found[kind] = await lake.find(
                filter_, dataset=side_name(dataset, side) if side else dataset,
                projection=projection, limit=BACKLOG_CAP)
        backlog = {
            "tick": sum(1 for doc in found["tick"] if not doc.get("completedAt")),
            "effects": len(found["effects"]),
            "propagate": len(found["propagate"]) + sum(  # a group's children (engine/stamps.py)
                len(doc.get("children") or ()) for doc in found["stamps"]),
        }
        for flag in FLAGS:
            backlog[flag] = sum(1 for doc in found["owing"] if holds(doc.get(FIELD), flag))
        self.backlog = backlog


def backlog_queries(now: str) -> dict[str, tuple[str, dict[str, Any], dict[str, int]]]:
    """The backlog's reads by kind: (side collection or "", filter, projection)."""
    instance = {"_type": INSTANCE_TYPE}
    return {
        "tick": ("", {**instance, "nextEvaluationAt": {"$gt": "", "$lte": now}},
                 {"_id": 1, "completedAt": 1}),
        "effects": ("", {**instance, "effectsDueAt": {"$gt": "", "$lte": now}}, {"_id": 1}),
        "propagate": ("", {**instance, "propagateTo": {"$gt": ""}}, {"_id": 1}),
        "stamps": ("stamps", {"parent": {"$gt": ""}}, {"children": 1}),
        "owing": ("", {**instance, **ANY_OWED}, {"_id": 1, FIELD: 1}),
    }


class AppFigures(Collector):
    """Collects the figures of every app watched in this process."""

    def __init__(self) -> None:
        self.apps: list[Watched] = []

    def collect(self) -> Iterator[Metric]:
        subscribers = GaugeMetricFamily(
            "kinflow_hub_subscribers", "Subscriptions the change hubs are serving now.")
        streams = GaugeMetricFamily(
            "kinflow_hub_streams", "Change streams open (one per dataset watched).")
        rss = GaugeMetricFamily(
            "kinflow_embedded_lake_rss_bytes",
            "Resident memory of the embedded lake daemon this process owns.")
        guard = CounterMetricFamily(
            "kinflow_embedded_lake_memory_restarts",
            "Restarts of the embedded lake by its memory guard (past KINFLOW_EMBEDDED_MEMORY_MB).")
        restarts = CounterMetricFamily(
            "kinflow_embedded_lake_restarts",
            "Embedded lake daemons this process started after its first (any cause).")
        rows = GaugeMetricFamily(
            "kinflow_cohort_rows", "Registry rows of the open cohorts, by status (active, "
            "queued, done, ...), summed over every unfinished parent.", labels=["status"])
        cohorts = GaugeMetricFamily("kinflow_cohorts_open", "Cohorts of unfinished parents.")
        paused = GaugeMetricFamily("kinflow_cohorts_paused", "Open cohorts an operator paused.")
        backlog = GaugeMetricFamily(
            "kinflow_heartbeat_backlog", "Instances owing heartbeat work now, by kind.",
            labels=["kind"])
        sums: Counter[str] = Counter()
        backlogs: Counter[str] = Counter()
        lake: Counter[str] = Counter()
        totals: Counter[str] = Counter()
        for app in list(self.apps):
            if app.hubs is not None:  # an API's hubs (a lone worker serves none)
                totals["subscribers"] += app.hubs.subscriber_count()
                totals["streams"] += app.hubs.stream_count()
            totals["cohorts"] += app.cohorts
            totals["paused"] += app.paused
            self._lake(app.connection, lake)
            sums.update(app.rows)
            backlogs.update(app.backlog)
        if self.apps:
            subscribers.add_metric([], totals["subscribers"])
            streams.add_metric([], totals["streams"])
            cohorts.add_metric([], totals["cohorts"])
            paused.add_metric([], totals["paused"])
        for family, key in ((rss, "rss"), (guard, "guard"), (restarts, "restarts")):
            if key in lake:
                family.add_metric([], lake[key])
        for status, count in sorted(sums.items()):
            rows.add_metric([status], count)
        for kind, count in sorted(backlogs.items()):
            backlog.add_metric([kind], count)
        yield from (subscribers, streams, rss, guard, restarts, rows, cohorts, paused, backlog)

    @staticmethod
    def _lake(connection: Any, lake: Counter[str]) -> None:
        embedded = connection.embedded
        if embedded is None:
            return
        pid = embedded.pid
        if pid is not None and embedded.owned:
            used = rss_mib(pid)
            if used is not None:
                lake["rss"] += int(used * 1024 * 1024)
        if connection.guard is not None:
            lake["guard"] += connection.guard.recycles
        if connection.keeper is not None:
            lake["restarts"] += connection.keeper.status.restarts


FIGURES = AppFigures()
REGISTRY.register(FIGURES)


def watch(connection: Any, hubs: Any, engine: Any) -> Watched:
    watched = Watched(connection, hubs, engine)
    FIGURES.apps.append(watched)
    return watched


def unwatch(watched: Watched) -> None:
    if watched in FIGURES.apps:
        FIGURES.apps.remove(watched)
