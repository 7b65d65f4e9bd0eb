"""Registration in batches, the I/O half (core/cohort/batches.py, core/cohort/registration.py).

``read_batch`` reads one batch of a ``forEach``: the next ``size`` documents
after the checkpoint's ``_id``, in ``_id`` order, through the ``_id`` index
alone (a filter beside the ``_id`` range made the embedded lake scan and
sort the whole dataset for every batch, docs/subworkflows.md), and evaluates
the query over the members among them. Outside the parent's transaction,
like every query a plan reads: the parent's commit is what makes a batch
count, fenced by its ``_rev``; a batch read twice reads the same documents.

``Registrar`` commits the batches after a spawn: right after the spawn's
commit, in the background of the process that spawned, and from the
heartbeat (``owesRegistration``) after a crash. One batch per commit, so a
crash loses at most the batch being read. A batch's children past the
transaction's share are created while the next batch is read and planned
(``Materialiser.overlapped``, engine/materialise.py).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kinflow.core.cohort import batches
from kinflow.core.cohort.registration import plan_register
from kinflow.core.context import Actor, BatchRequest, RowBatch
from kinflow.core.mutation import Mutation
from kinflow.groq.store import off_loop
from kinflow.storage.lake import Lake
from kinflow.timestamps import iso

if TYPE_CHECKING:
    from kinflow.engine.materialise import Materialiser
    from kinflow.engine.transact import Transactor

log = logging.getLogger("kinflow.engine")
_DEREF_ROUNDS = 4
_PROBES = 48  # bounded ranges holding documents one batch reads at most
# empty ranges in a row one batch reads at most: enough to reach the end of the key
# space from any scale, growing 16x each (``_ranges``)
_EMPTY_PROBES = batches.TOP.bit_length() // 4 + 1
# empty ranges in a row that grow 2x each before they grow 16x: a character's worth of
# key units (``batches._BASE``, about 2**20) and a little more (``_ranges``)
_NEAR = 24
MAX_BATCHES = 100_000  # commits one ``run`` makes at most (a million rows at 10 per batch)


async def read_batch(lake: Lake, dataset: str, request: BatchRequest, now: datetime,
                     transact: Transactor | None = None, *,
                     open_timeout: float | None = None) -> RowBatch:
    """One batch of a registering cohort's rows (``BatchRequest``); ``open_timeout``: the
    deadline of a read of the open range (engine/first_batch.py)."""
    if request.at is None:  # the first batch: membership is fixed now, on the lake's clock
        request = replace(request, at=iso(datetime.now(UTC)))
    assert request.at is not None
    kind = batches.pinned_type(request.query, request.params)
    if kind is not None and request.after is not None:
        docs, last, done, scale = await _ranges(lake, dataset, kind, request)
    else:
        docs = await _after(lake, dataset, kind, request.after, request.size, open_timeout)
        done = len(docs) < request.size
        last = str(docs[-1]["_id"]) if docs else request.after
        scale = (batches.scale_of(str(docs[0]["_id"]), str(docs[-1]["_id"]))
                 if len(docs) > 1 else request.scale)
    cache: dict[str, dict[str, Any] | None] = {str(doc["_id"]): doc for doc in docs}
    missing: set[str] = set()

    def resolve(ref: str) -> Any:
        if ref in cache:
            return cache[ref]
        missing.add(ref)
        return None

    budget = transact.limits.groq_budget() if transact is not None else None
    for _ in range(_DEREF_ROUNDS):
        missing.clear()

        def run() -> list[Any]:
            return batches.rows_of(request, docs, now, resolve)

        rows = run() if budget is None else await off_loop(run, budget)
        if not missing:
            break
        found = await lake.find({"_id": {"$in": sorted(missing)}}, dataset=dataset)
        cache.update({ref: None for ref in missing})
        cache.update({str(doc["_id"]): doc for doc in found})
    return RowBatch(rows=rows, last=last, done=done, at=request.at, scale=scale)


async def _after(lake: Lake, dataset: str, kind: str | None, after: str | None, limit: int,
                 timeout: float | None = None) -> list[dict[str, Any]]:
    """The first ``limit`` documents after ``after`` (of type ``kind``), in ``_id`` order.
    The embedded lake reads the whole open range for this, whatever the limit."""
    flt: dict[str, Any] = {"_id": {"$gt": after}} if after is not None else {}
    if kind is not None:
        flt["_type"] = kind
    return await lake.find(flt, dataset=dataset, sort=[("_id", 1)], limit=limit,
                           timeout=timeout)


async def _ranges(lake: Lake, dataset: str, kind: str, request: BatchRequest
                  ) -> tuple[list[dict[str, Any]], str | None, bool, int | None]:
    """About ``size`` documents after ``after`` through bounded ``(_type, _id)`` ranges:
    ``(documents, the last key read up to, done, the scale for the next batch)``.

    Where the keys end in a run of decimal digits (``item-0001234``), a range spans a
    count of numbers (``batches.numbered_bound``): the first one ``size``, each next one as
    many as the documents still wanted need at the density the ranges read so far (at
    most 16x more; 16x after an empty one), until the run's widest number; the code point
    ranges follow from there. Those read ``2**scale`` key units: an empty range grows the
    scale by 2x for ``_NEAR`` empty ranges in a row, then by 16x (a gap, or the end of the
    key space), a short one by 2x. Either kind of range with more than twice what the batch
    still wants is cut there (its rest is read again by the next batch), the next batch's
    code point ranges starting from the span of the documents it kept. The code point
    arithmetic alone sees, over numbered ids, a tenfold jump in key units at every carry of
    a digit, where a range grown at once held ten batches' documents; it read about 1.5
    documents per row of a 20,000-row cohort, the numbered ranges one. At most
    ``_PROBES`` ranges that held documents; empty ranges in a row go on to the end of the
    key space (an empty range costs the lake no document).

    A full batch looks past itself (``_past``), so the batch that reads a cohort's last
    members says ``done`` whether it filled or not: its commit ends the registration,
    and a gate on ``$cohort.settled`` holds in that commit.
    """
    assert request.after is not None
    size, lo = request.size, request.after
    scale = request.scale if request.scale is not None else 64
    step: int | None = size  # numbers the next range spans, while the keys are numbered
    docs: list[dict[str, Any]] = []
    probes = empty = 0  # ranges that held documents; empty ranges in a row
    while probes < _PROBES and empty < _EMPTY_PROBES:
        hi = batches.numbered_bound(lo, step) if step is not None else None
        numbered = hi is not None
        if hi is None:
            step = None  # no numbered key, or past the run's widest number: code points
            hi = batches.bound_after(lo, scale)
        if hi is None:  # past the last possible key: the open rest of the range
            wanted = size - len(docs)
            tail = await _after(lake, dataset, kind, lo, wanted)
            docs += tail
            return docs, (str(docs[-1]["_id"]) if docs else lo), len(tail) < wanted, scale
        found = await lake.find({"_type": kind, "_id": {"$gt": lo, "$lte": hi}},
                                dataset=dataset, sort=[("_id", 1)])
        wanted = size - len(docs)
        if len(found) > 2 * wanted:
            docs += found[:wanted]
            return docs, str(docs[-1]["_id"]), False, _kept_scale(found, wanted, scale, size)
        docs += found
        lo = hi
        if len(docs) >= size:
            gap = _numbered_gap(request.after, lo, size) if numbered else None
            return docs, lo, await _past(lake, dataset, kind, lo, scale, size, gap), scale
        probes, empty = (probes + 1, 0) if found else (probes, empty + 1)
        if step is not None:
            step = _next_step(step, len(found), size - len(docs))
        else:
            scale += (1 if empty <= _NEAR else 4) if not found else (
                1 if len(found) < wanted // 2 else 0)
    return docs, lo, False, scale


def _next_step(step: int, found: int, wanted: int) -> int:
    """The numbers the next numbered range spans: as many as ``wanted`` documents need at
    the density of the last one (``found`` in ``step`` numbers), at most 16x ``step``."""
    if not found:
        return step * 16
    return max(1, min(step * 16, -(-wanted * step // found)))


def _numbered_gap(first: str, last: str, size: int) -> int:
    """Numbers as wide as two of a numbered batch's documents (it read about ``size``
    from ``first`` to ``last``)."""
    span = (batches.number_of(last) or 0) - (batches.number_of(first) or 0)
    return max(1, 2 * span // max(size, 1))


def _kept_scale(found: list[dict[str, Any]], wanted: int, scale: int, size: int) -> int:
    """The next batch's scale after a cut range: a range holding about ``size`` documents
    by the span of the ``wanted`` first of ``found`` (the documents the batch kept), or,
    keeping fewer than two, ``scale`` shrunk by the excess."""
    if wanted < 2:
        return max(0, scale - (len(found) // max(wanted, 1)).bit_length())
    spread = batches.scale_of(str(found[0]["_id"]), str(found[wanted - 1]["_id"]))
    return spread + max(0, (size // wanted).bit_length() - 1)


async def _past(lake: Lake, dataset: str, kind: str, lo: str, scale: int, size: int,
                gap: int | None = None) -> bool:
    """Whether no document of the type follows ``lo``, a full batch's end (its ranges were
    ``2**scale`` wide, or spanned numbers about ``gap`` apart per two documents, and held
    about ``size`` documents).

    The first range is as wide as two of the batch's documents, and each empty one grows
    16x until one holds a document (the cohort goes on: ``False``) or the key space ends;
    over numbered keys the ranges span numbers (``batches.numbered_bound``) up to the run's
    widest number, code point ranges after it. Where the next documents follow closely,
    this reads one or two of them (the next batch reads them again; across a gap in the
    keys, the documents of the first range past it); past the cohort's end every range is
    empty and costs the lake no document.
    """
    while gap is not None and (hi := batches.numbered_bound(lo, gap)) is not None:
        if await _holds(lake, dataset, kind, lo, hi):
            return False
        lo, gap = hi, gap * 16
    scale = max(0, scale - size.bit_length() + 2)
    for _ in range(_EMPTY_PROBES):
        hi = batches.bound_after(lo, scale)
        if hi is None:
            return not await _after(lake, dataset, kind, lo, 1)
        if await _holds(lake, dataset, kind, lo, hi):
            return False
        lo, scale = hi, scale + 4
    return False


async def _holds(lake: Lake, dataset: str, kind: str, lo: str, hi: str) -> bool:
    """Whether a document of the type lies in ``(lo, hi]`` (one read, at most one document)."""
    return bool(await lake.find({"_type": kind, "_id": {"$gt": lo, "$lte": hi}},
                                dataset=dataset, projection={"_id": 1}, limit=1))


class Registrar:
    """Registers the rest of a cohort's rows, a batch per commit."""

    def __init__(self, transact: Transactor, materialiser: Materialiser) -> None:
        self.transact = transact
        self.materialiser = materialiser
        self.now: set[str] = set()  # parents this process is registering right now
        self.tasks: set[asyncio.Task[None]] = set()

    async def after_commit(self, mutation: Mutation) -> None:
        """After a commit that left rows to register: go on in the background."""
        instance = mutation.instance
        if not instance.owesRegistration or instance.id_ in self.now:
            return
        self.now.add(instance.id_)  # before the task runs: one continuation per parent
        task = asyncio.ensure_future(self._background(instance.id_))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _background(self, parent_id: str) -> None:
        try:
            await self.run(parent_id, claimed=True)
        except Exception:  # the heartbeat takes over (owesRegistration stays set)
            log.warning("registration of %s stopped; the heartbeat resumes it", parent_id,
                        exc_info=True)

    async def run(self, parent_id: str, actor: Actor | None = None, *,
                  claimed: bool = False) -> int:
        """Commit batches until no cohort of the parent has rows left to register;
        returns how many batches it committed."""
        if not claimed:
            if parent_id in self.now:
                return 0
            self.now.add(parent_id)
        t = self.transact
        n = 0
        try:
            async with self.materialiser.overlapped(parent_id) as behind:
                for _ in range(MAX_BATCHES):
                    t.faults.check("mid-registration")
                    mutation = await t.commit(parent_id, plan_register, verb="registerRows",
                                              actor=actor or Actor.system())
                    await behind.wait(keep=1)  # one batch's children behind at most
                    if mutation.dirty:
                        n += 1
                    if not mutation.instance.owesRegistration:
                        break
        finally:
            self.now.discard(parent_id)
        return n

    async def idle(self) -> None:
        """Wait for every background registration of this process (tests, shutdown)."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)
