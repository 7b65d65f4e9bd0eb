"""The heartbeat worker: finishes what verbs left owed, whoever crashed.

Every engine commit leaves durable hints on the instance document when work
is owed after it (docs/subworkflows.md), each behind an index:

* ``nextEvaluationAt`` has passed: a time gate may flip, or a hop is owed
  (a commit that moved, a child created primed whose first hop was not run);
* ``propagateTo``: a child changed and its parent's row is not stamped yet;
* ``owesAborts``: rows are condemned and the aborts not carried out;
* ``owesCancels``: a cancellation (or ``onExit: cancel``, ``cancel-rest``) owes
  children cancel requests not made yet; a cancellation's timeout is a
  ``nextEvaluationAt`` like a time gate's;
* ``materialising``: a large spawn registered rows whose children are not all
  created yet;
* ``owesRegistration``: a cohort's rows are not all registered yet (a batch is
  owed, ``engine/registration.py``);
* ``owesBulk``: a bulk cohort verb (``redriveCohort``) committed some of its
  batches and not the last (``engine/bulk.py``);
* ``effectsDueAt`` has passed: effects wait to run, or a claim's lease ended.

The four flags share one index: the stored instance names those it has set
in ``owing`` (``kinflow.core.owing``); a pass reads the instances that owe
anything once, and each of those kinds keeps those holding its flag
(``engine/owing_read.py``).

One pass reads a bounded batch of each kind and handles the items of a page
``concurrency`` at a time (they are independent, and an effect's handler may
wait on the network: one at a time, a worker ran 2.4 effects a second while
orders queued 7), every item under a lease document (``_type: kinflow.lease``,
one per item, taken with a conditional write and an expiry, kept in the side collection
``<dataset>.engine``: ``kinflow.engine.leases``), so several workers share the work
and no item is handled by two at once; after taking the lease the worker
checks the item is still owed, so an item another worker just finished is
skipped. Passes are bounded in items and in time. An item whose lease it
cannot take is paged past, never retried in the same pass: however many
items another worker holds (or a stale lease blocks) ahead of the rest, the
pass still reaches the others.

An item that fails with a permanent refusal (``cascade-limit``, say) is
parked with its reason and backs off (``kinflow.engine.parking``) instead of
being retried on every pass; ``tick`` un-parks it.

Retention (``kinflow.engine.retention``): at most once per
``retention_interval``, after the owed work, one worker at a time (under the
lease ``lease.retention``) purges the finished families whose retention ran
out, a bounded number per pass, finishing first any purge a crash interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from kinflow.core.retention import PurgeCounts
from kinflow.core.state import INSTANCE_TYPE
from kinflow.engine import Actor, Engine
from kinflow.engine.leases import LEASE_TYPE, Leases, prepare_engine_side
from kinflow.engine.owing_read import OwingRead
from kinflow.engine.parking import PARKED_INDEXES, Parked, Parking, permanent
from kinflow.engine.reactions import follow_content_changes
from kinflow.engine.retention import Purger
from kinflow.engine.stamps import Stamps
from kinflow.errors import KinflowError
from kinflow.observability import work
from kinflow.timestamps import iso, parse_iso

if TYPE_CHECKING:
    from kinflow.storage.hub import ChangeHub

log = logging.getLogger("kinflow.worker")
__all__ = ["LEASE_TYPE", "PassReport", "Worker"]
_INSTANCE = {"_type": INSTANCE_TYPE}


def _older(document: dict[str, Any], moment: str) -> bool:
    """Whether the document was last written at or before ``moment`` (ISO strings sort)."""
    updated = document.get("_updatedAt")
    return isinstance(updated, str) and updated <= moment


def _matches(document: dict[str, Any], filter_: dict[str, Any]) -> bool:
    """``filter_`` on one document: each field equal, absent for ``None``, or ``$lte``."""
    for key, wanted in filter_.items():
        value = document.get(key)
        if isinstance(wanted, dict):
            if set(wanted) != {"$lte"}:
                raise ValueError(f"unsupported condition on {key!r}: {wanted!r}")
            bound = wanted["$lte"]
            if not (isinstance(value, type(bound)) and value <= bound):
                return False
        elif value != wanted:
            return False
    return True


def _forgotten(now: str) -> str:
    """Failures older than a day are forgotten: a later one backs off from the start."""
    return iso(parse_iso(now) - timedelta(days=1))


@dataclass
class PassReport:
    """What one pass did: ``processed`` lists every (kind, item) this worker handled."""

    processed: list[tuple[str, str]] = field(default_factory=list)
    skipped: int = 0  # items another worker held or had already finished
    failed: list[tuple[str, str, str]] = field(default_factory=list)
    parked: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, item, code)
    purged: PurgeCounts | None = None  # what retention did, when it ran this pass
    reaped: int = 0  # dead processes whose open transactions this pass ended

    def of(self, kind: str) -> list[str]:
        return [item for k, item in self.processed if k == kind]


class Worker:
    """Heartbeat over one engine; run several against one lake to share the work."""

    def __init__(
        self,
        engine: Engine,
        *,
        worker_id: str | None = None,
        batch: int = 50,
        pass_seconds: float = 10.0,
        lease_seconds: float = 60.0,
        interval: float = 1.0,
        grace_seconds: float = 5.0,
        hub: ChangeHub | None = None,
        park_seconds: float = 60.0,
        park_max_seconds: float = 3600.0,
        retention_days: int | None = None,
        retention_interval: float = 60.0,
        concurrency: int = 8,
    ) -> None:
        self.engine = engine
        self.maintenance = engine.maintenance  # the heartbeat's port (engine/maintenance.py)
        self.lake = engine.lake
        self.worker_id = worker_id or f"worker-{secrets.token_hex(4)}"
        self.actor = Actor.system(self.worker_id)
        self.batch = batch
        self.concurrency = max(1, concurrency)
        self.pass_seconds = pass_seconds
        self.lease_seconds = lease_seconds
        self.interval = interval
        self.grace_seconds = grace_seconds  # leave fresh hints to the process that set them
        self.hub = hub
        self.leases = Leases(self.lake, engine.dataset, self.worker_id, lease_seconds)
        self.parking = Parking(self.lake, engine.dataset, base=park_seconds,
                               cap=park_max_seconds)
        self._parked: dict[str, Parked] = {}
        self.retention_days = retention_days  # KINFLOW_RETENTION_DAYS; definitions may override
        self.retention_interval = retention_interval
        self.purger = Purger(self.lake, engine.dataset, faults=engine.faults)
        self._stamps = Stamps(self.lake, engine.dataset)
        self._retained_at: float | None = None
        self._ready = False

    async def ensure_ready(self) -> None:
        if not self._ready:
            await self.engine.ensure_ready()
            await self.lake.declare_indexes(PARKED_INDEXES, kind="engine")
            await self.purger.ensure_ready()
            moved = await prepare_engine_side(self.lake, self.engine.dataset)
            if moved:
                log.info("moved %d lease documents out of dataset %s", moved,
                         self.engine.dataset)
            self._ready = True

    # ------------------------------------------------------------ the loop

    async def run(self, stop: asyncio.Event) -> None:
        """Run passes until ``stop`` is set (and follow content changes if a hub is given)."""
        await self.ensure_ready()
        follower: asyncio.Task[None] | None = None
        if self.hub is not None:
            follower = asyncio.create_task(follow_content_changes(self.engine, self.hub,
                                                                  actor=self.actor))
        try:
            while not stop.is_set():
                try:
                    await work.heartbeat_pass(self.run_pass)  # metrics (docs/observability.md)
                except Exception:  # a failing pass must not stop the heartbeat
                    log.exception("heartbeat pass failed")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval)
        finally:
            if follower is not None:
                follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower

    async def run_pass(self) -> PassReport:
        """One bounded pass over every kind of owed work."""
        await self.ensure_ready()
        report = PassReport()
        deadline = asyncio.get_running_loop().time() + self.pass_seconds
        await self._end_dead_sessions(report)
        now = self.engine.clock()
        # system fields are stamped by the lake's wall clock, not the engine's
        stale = iso(datetime.now(UTC) - timedelta(seconds=self.grace_seconds))
        owing = OwingRead(self.lake, self.engine.dataset)  # one read serves the five flags
        kinds: list[tuple[str, Callable[[list[str]], Awaitable[list[str]]],
                          Callable[[str], Awaitable[bool]], Callable[[str], Awaitable[Any]]]] = [
            ("materialise", lambda seen: self._flagged("materialising", seen, stale, owing=owing),
             self._materialise_owed,
             lambda i: self.maintenance.finish_materialising(i, actor=self.actor)),
            ("register", lambda seen: self._flagged("owesRegistration", seen, stale, owing=owing),
             self._registration_owed,
             lambda i: self.maintenance.finish_registration(i, actor=self.actor)),
            ("bulk", lambda seen: self._flagged("owesBulk", seen, stale, owing=owing),
             self._bulk_owed, lambda i: self.maintenance.finish_bulk(i, actor=self.actor)),
            ("drain", lambda seen: self._flagged("owesAborts", seen, owing=owing),
             lambda i: self._owed(i, {"owesAborts": True}),
             lambda i: self.maintenance.repair(i, actor=self.actor)),
            ("cancel", lambda seen: self._flagged("owesCancels", seen, owing=owing),
             lambda i: self._owed(i, {"owesCancels": True}),
             lambda i: self.maintenance.repair(i, actor=self.actor)),
            ("propagate", lambda seen: self._parents(stale, seen),
             lambda i: self._owed_parent(i, stale), self.maintenance.propagate_to),
            ("tick", lambda seen: self.maintenance.due_instances(limit=self.batch, exclude=seen),
             lambda i: self._owed(i, {"nextEvaluationAt": {"$lte": iso(now)},
                                      "completedAt": None}),
             lambda i: self.engine.tick(i, actor=self.actor)),
            ("effects", lambda seen: self._ids({"effectsDueAt": {"$gt": "", "$lte": iso(now)}},
                                               seen),
             lambda i: self._owed(i, {"effectsDueAt": {"$lte": iso(now)}}), self._effects),
        ]
        backing_off = await self._parked_now(iso(now))
        for kind, find, still_owed, handle in kinds:
            # this pass's items of this kind, taken or not, and parked ones: paged past
            seen: list[str] = list(backing_off)
            taken = 0
            while taken < self.batch:
                found = [item for item in await find(seen) if item not in seen]
                page = found[: self.batch]
                seen.extend(page)
                done, finished = await self._page(page, deadline, functools.partial(
                    self._one, report, kind, still_owed=still_owed, handle=handle))
                taken += done
                if not finished:  # out of time
                    return report
                if len(found) < self.batch:  # that was all of it: no page after this one
                    break
        await self._retention(report, now)
        return report

    async def _page(self, items: list[str], deadline: float,
                    one: Callable[[str], Awaitable[bool]]) -> tuple[int, bool]:
        """Handle ``items``, ``concurrency`` at a time; an item not started by the
        deadline is left for the next pass. Returns (items taken, every item started)."""
        loop = asyncio.get_running_loop()
        gate = asyncio.Semaphore(self.concurrency)

        async def bounded(item: str) -> bool | None:
            async with gate:
                if loop.time() > deadline:
                    return None
                return await one(item)

        tasks = [asyncio.ensure_future(bounded(item)) for item in items]
        try:
            outcomes = await asyncio.gather(*tasks)
        except BaseException:  # one item's lake failure ends the pass, as it always did
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return sum(1 for o in outcomes if o), all(o is not None for o in outcomes)

    async def _end_dead_sessions(self, report: PassReport) -> None:
        """End the transactions a killed process left open (they block its instances)."""
        if self.lake.sessions is None:
            return
        try:
            report.reaped = await self.lake.sessions.reap()
        except Exception as exc:  # the pass goes on; the server reaps them in time anyway
            log.warning("could not reap dead sessions: %s", exc)

    async def _retention(self, report: PassReport, now: datetime) -> None:
        """Purge the families whose retention ran out, if it is time (one worker at a time)."""
        clock = asyncio.get_running_loop().time()
        if self._retained_at is not None and clock - self._retained_at < self.retention_interval:
            return
        self._retained_at = clock
        if not await self.leases.acquire("lease.retention", self.engine.clock()):
            return
        try:
            report.purged = await self.purger.retention_pass(now, self.retention_days,
                                                             limit=self.batch)
            if report.purged.roots:
                log.info("retention purged %d families (%d instances)", report.purged.roots,
                         report.purged.instances)
            if report.purged.roots >= self.batch:  # a backlog: keep at it on the next pass
                self._retained_at = None
        except Exception as exc:  # retention never stops the heartbeat
            report.failed.append(("retention", self.engine.dataset, f"{type(exc).__name__}: {exc}"))
            log.warning("retention failed: %s", exc)
        finally:
            await self.leases.release("lease.retention")

    async def _one(self, report: PassReport, kind: str, item: str,
                   still_owed: Callable[[str], Awaitable[bool]],
                   handle: Callable[[str], Awaitable[Any]]) -> bool:
        """Handle one item under its lease; ``False`` when the lease is held elsewhere."""
        lease = f"lease.{kind}.{item}"
        if not await self.leases.acquire(lease, self.engine.clock()):
            report.skipped += 1
            return False
        try:
            if not await still_owed(item):
                report.skipped += 1
                return True
            report.processed.append((kind, item))
            await handle(item)
            self._parked.pop(item, None)  # it went through: the next failure starts afresh
        except Exception as exc:  # one item never stops a pass
            report.failed.append((kind, item, f"{type(exc).__name__}: {exc}"))
            log.warning("heartbeat %s %s failed: %s", kind, item, exc)
            if isinstance(exc, KinflowError) and permanent(exc):
                await self._park(report, kind, item, exc)
        finally:
            await self.leases.release(lease)
        return True

    async def _parked_now(self, now: str) -> list[str]:
        """Ids still backing off; parkings whose back-off ended are deleted (the item is
        tried again this pass, if still owed) and remembered here to double the next one."""
        stored = await self.parking.all()
        self._parked = {i: p for i, p in self._parked.items() if p.until > _forgotten(now)}
        self._parked.update(stored)
        for item, parked in stored.items():
            if parked.until <= now:
                await self.parking.unpark(item)
        return [item for item, parked in stored.items() if parked.until > now]

    async def _park(self, report: PassReport, kind: str, item: str, exc: KinflowError) -> None:
        """Park an item a retry cannot fix; a failure after a back-off doubles it."""
        before = self._parked.get(item)
        try:
            parked = await self.parking.park(item, kind, exc, self.engine.clock(),
                                             failures=(before.failures + 1) if before else 1)
        except Exception as error:  # parking is an optimisation: the item is retried
            log.warning("could not park %s: %s", item, error)
            return
        self._parked[item] = parked
        report.parked.append((kind, item, exc.code))
        log.warning("parked %s until %s after %s", item, parked.until, exc.code)

    # ------------------------------------------------------------ queries

    # Every query below is ``_type`` plus ONE indexed predicate, so the embedded
    # lake's planner serves it from that field's partial index (it only uses an
    # index covering every predicate; any other predicate made it read every
    # instance: 0.3-1.3 s per query over 5,000, measured). A bounded range
    # (``$gt: ""``) keeps the documents that lack the field (indexed as null)
    # out of the scan. What else an item must satisfy (not yet seen this pass,
    # older than the grace period) is checked here on the few ids returned.

    async def _ids(self, filter_: dict[str, Any], seen: list[str],
                   stale: str | None = None) -> list[str]:
        found = await self.lake.find({**_INSTANCE, **filter_}, dataset=self.engine.dataset,
                                     projection={"_id": 1, "_updatedAt": 1},
                                     limit=self.batch + len(seen))
        return self._unseen(found, seen, stale)

    def _unseen(self, found: list[dict[str, Any]], seen: list[str],
                stale: str | None) -> list[str]:
        """A page of ``found``: not seen this pass, older than ``stale`` if given."""
        skip = set(seen)
        return [str(doc["_id"]) for doc in found if str(doc["_id"]) not in skip
                and (stale is None or _older(doc, stale))][: self.batch]

    async def _flagged(self, flag: str, seen: list[str], stale: str | None = None,
                       owing: OwingRead | None = None) -> list[str]:
        """Instances owing the repair ``flag``, from ``owing`` (the pass's one read of every
        owing instance, ``engine/owing_read.py``) or a read of their own."""
        owing = owing or OwingRead(self.lake, self.engine.dataset)
        return self._unseen(await owing.holding(flag), seen, stale)

    async def _materialise_owed(self, instance_id: str) -> bool:
        # a spawn this process is still materialising is not a crash's leftover:
        # rebuilding its children meanwhile would do the whole spawn twice
        if instance_id in self.maintenance.materialising_now:
            return False
        return await self._owed(instance_id, {"materialising": True})

    async def _registration_owed(self, instance_id: str) -> bool:
        # a registration this process is still running is not a crash's leftover
        if instance_id in self.maintenance.registering_now:
            return False
        return await self._owed(instance_id, {"owesRegistration": True})

    async def _bulk_owed(self, instance_id: str) -> bool:
        # a bulk call this process is still running is not a crash's leftover
        if instance_id in self.maintenance.bulk_now:
            return False
        return await self._owed(instance_id, {"owesBulk": True})

    async def _owed(self, instance_id: str, filter_: dict[str, Any]) -> bool:
        """Whether the instance still matches ``filter_`` (equalities, ``None`` and
        ``$lte``). Read by ``_id`` alone and matched here: with any other predicate
        beside ``_id`` the embedded lake scanned the whole collection (0.45 s per
        item on a lake of 39,000 documents, measured), and the worker asks once per
        item it takes."""
        found = await self.lake.find({"_id": instance_id}, dataset=self.engine.dataset,
                                     projection={"_type": 1, **dict.fromkeys(filter_, 1)})
        return bool(found) and _matches(found[0], {**_INSTANCE, **filter_})

    async def _parents(self, stale: str, seen: list[str]) -> list[str]:
        found = await self.lake.find(
            {**_INSTANCE, "propagateTo": {"$gt": ""}}, dataset=self.engine.dataset,
            projection={"propagateTo": 1, "_updatedAt": 1},
        )
        found += [{"propagateTo": doc.get("parent"), "_updatedAt": doc.get("_updatedAt")}
                  for doc in await self._stamps.parents()]  # group commits' (engine/stamps.py)
        skip = set(seen)
        parents: list[str] = []
        for doc in found:
            parent = doc.get("propagateTo")
            if (isinstance(parent, str) and parent not in skip and parent not in parents
                    and _older(doc, stale)):
                parents.append(parent)
        return parents

    async def _owed_parent(self, parent_id: str, stale: str) -> bool:
        found = await self.lake.find({**_INSTANCE, "propagateTo": parent_id},
                                     dataset=self.engine.dataset, projection={"_updatedAt": 1})
        found += await self._stamps.owed_to(parent_id)
        return any(_older(doc, stale) for doc in found)

    async def _effects(self, instance_id: str) -> None:
        # the drain takes over an expired claim of an effect it runs; only the claims
        # of effects no handler here runs are left to release (one commit fewer for
        # every effect that runs)
        drained = await self.engine.drain_effects(instance_id, actor=self.actor)
        if drained.skipped:
            await self.maintenance.sweep_stale_claims(instance_id, actor=self.actor)
