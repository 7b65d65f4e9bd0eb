"""Children a large spawn could not create inside its own transaction.

A spawn commit creates up to ``limits.spawn_txn`` children with the parent and
marks the parent ``materialising``; the rest are created right after, in
idempotent batches (an id already there is skipped), and the mark is cleared.
A crash in between leaves the mark: ``finish`` rebuilds what is missing.

A registration run (engine/registration.py) commits a cohort's batches one
after another. Inside ``overlapped`` a batch's overflow is created while the
next batch is read and planned (the API plans while the lake writes: two
processes, two cores), at most one batch behind: the run waits for batch N's
children right after batch N+1's commit. The mark stays set until the run has
waited for every batch; the run then clears it once. A crash in between leaves
it set, as above.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kinflow.core.cohort import sparse
from kinflow.core.commit import plan_materialise
from kinflow.core.context import Actor, PlanContext
from kinflow.core.mutation import Mutation
from kinflow.core.state import Instance, SubworkflowEntry
from kinflow.engine import sweeps
from kinflow.engine.owing_hint import clear_flag
from kinflow.storage.lake import Lake
from kinflow.timestamps import iso

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession

    from kinflow.engine.transact import Transactor

_ID_BATCH = 500  # ids per existence lookup


async def existing_ids(lake: Lake, dataset: str, ids: Sequence[str],
                       session: AsyncClientSession | None = None) -> set[str]:
    """Which of ``ids`` are stored, in indexed batches."""
    exists: set[str] = set()
    for start in range(0, len(ids), _ID_BATCH):
        found = await lake.find({"_id": {"$in": list(ids[start:start + _ID_BATCH])}},
                                dataset=dataset, session=session, projection={"_id": 1})
        exists |= {str(doc["_id"]) for doc in found}
    return exists


class Materialiser:
    """Creates the overflow of a spawn; remembers which parents it is creating now."""

    def __init__(self, transact: Transactor) -> None:
        self.transact = transact
        # one batch of children (an attribute, so a test can hold a batch back)
        self.insert: Callable[[list[dict[str, Any]]], Awaitable[None]] = self.insert_missing
        # parents whose children this process is creating right now (how many runs and
        # creations of each): the heartbeat leaves them alone (a large spawn outlives its
        # grace period)
        self.now: Counter[str] = Counter()

    async def after_commit(self, mutation: Mutation) -> None:
        """Post-commit work of a spawn: create the children that did not fit the transaction."""
        if not mutation.creates:
            return
        self.transact.faults.check("after-spawn-commit")
        rest = mutation.creates[self.transact.limits.spawn_txn:]
        if not rest:
            return
        run = _RUN.get()
        if run is not None and run.parent_id == mutation.instance.id_:
            run.behind.append(asyncio.ensure_future(self.create(run.parent_id, rest)))
            return
        await self.materialise(mutation.instance.id_, rest)

    async def materialise(self, parent_id: str, documents: list[dict[str, Any]]) -> None:
        """Create children in idempotent batches, then clear the parent's mark."""
        self._hold(parent_id)
        try:
            await self.create(parent_id, documents)
            await self.clear(parent_id)
        finally:
            self._release(parent_id)

    @asynccontextmanager
    async def overlapped(self, parent_id: str) -> AsyncIterator[Overlap]:
        """A registration run on ``parent_id``: the overflow children of the commits it
        makes inside are created behind them; on the way out it waits for them all and,
        when every one was created, clears the mark."""
        run = Overlap(parent_id)
        token = _RUN.set(run)
        self._hold(parent_id)
        try:
            yield run
        finally:
            _RUN.reset(token)
            try:
                await run.wait()
                if run.created and not run.failed:
                    await self.clear(parent_id)
            finally:
                self._release(parent_id)

    async def create(self, parent_id: str, documents: list[dict[str, Any]]) -> None:
        """Create ``documents``, children of ``parent_id``, in idempotent batches."""
        t = self.transact
        self._hold(parent_id)
        try:
            size = max(1, t.limits.spawn_txn)
            for start in range(0, len(documents), size):
                if start:
                    t.faults.check("mid-materialise")
                await self.insert(documents[start:start + size])
        finally:
            self._release(parent_id)

    async def clear(self, parent_id: str) -> None:
        """Clear the parent's mark: every child it was owed exists.

        Rows keep their seeds: they are read only while ``materialising`` is set, and
        clearing them would rewrite every row of the cohort. A parent that vanished has
        nothing to mark.
        """
        t = self.transact
        now = t.clock()
        await clear_flag(t.lake, t.dataset, parent_id, "materialising", now=now,
                         written=lambda fenced, rev: self._cleared(parent_id, fenced, rev, now))

    def _hold(self, parent_id: str) -> None:
        self.now[parent_id] += 1

    def _release(self, parent_id: str) -> None:
        self.now[parent_id] -= 1
        if self.now[parent_id] <= 0:
            del self.now[parent_id]

    def _cleared(self, parent_id: str, fenced: str, rev: str, now: datetime) -> None:
        """The parent's mark is cleared: the state the process keeps of it (if it is the one
        the write was fenced on) stays valid with the mark off and the new ``_rev``.

        Without this every spawn or registration batch past ``limits.spawn_txn`` children
        made the parent's next commit load it again, whole: a registering cohort's commits
        then read and parsed every row registered so far, one batch after another.
        """
        kept = self.transact.kept.get(parent_id)
        if kept is None or kept.rev_ != fenced:
            return
        cleared = kept.model_copy(update={"materialising": None})  # (rows and memo shared)
        cleared.rev_, cleared.updatedAt_ = rev, iso(now)
        self.transact.keep(cleared)  # through keep: its bounds and order hold

    async def insert_missing(self, documents: list[dict[str, Any]]) -> None:
        await self.transact.lake.create_missing(documents, dataset=self.transact.dataset,
                                                now=self.transact.clock())

    async def finish(self, parent: Instance, actor: Actor) -> int:
        """Create the children a large spawn registered but a crash left uncreated: a
        sparse parent's rows are looked at a page of chunks at a time (each page read
        into a copy of its own), only the rows owed a child kept."""
        t = self.transact
        if not parent.materialising:
            return 0
        pages: list[list[int] | None] = [None]  # (a dense parent: every row at once)
        if sparse.is_sparse(parent):
            pages = list(sweeps.pages(list(range(sparse.rows_of(parent).chunk_count())),
                                      t.limits))
        owed: list[tuple[int, SubworkflowEntry]] = []
        for part in pages:
            seeded = (await sweeps.owed_rows(t, parent, part, _seeded) if part is not None
                      else [(place, r) for place, r in enumerate(parent.subworkflows)
                            if _seeded(r)])
            exists = await existing_ids(t.lake, t.dataset, [r.child_id for _, r in seeded])
            owed += [(place, r) for place, r in seeded if r.child_id not in exists]
        if not owed:
            return 0

        def plan(ctx: PlanContext) -> Mutation:
            return Mutation(instance=parent, creates=plan_materialise(parent, owed, ctx))

        mutation: Mutation = await t.plan(plan, actor, None, t.clock())
        await self.materialise(parent.id_, mutation.creates)
        return len(mutation.creates)


class Overlap:
    """One registration run's overflow creations still running behind its commits
    (``Materialiser.overlapped``)."""

    def __init__(self, parent_id: str) -> None:
        self.parent_id = parent_id
        self.behind: list[asyncio.Task[None]] = []
        self.created = 0  # commits whose overflow children were all created
        self.failed = False  # a commit's were not: the mark stays for the heartbeat

    async def wait(self, keep: int = 0) -> None:
        """Wait for every creation but the last ``keep`` started; the first failure is
        raised once all of them have finished."""
        cut = max(0, len(self.behind) - keep)
        ready, self.behind = self.behind[:cut], self.behind[cut:]
        if not ready:
            return
        results = await asyncio.gather(*ready, return_exceptions=True)
        failed = [result for result in results if isinstance(result, BaseException)]
        self.created += len(results) - len(failed)
        self.failed = self.failed or bool(failed)
        if failed:
            raise failed[0]


# the registration run committing in this context, if any (``Materialiser.overlapped``)
_RUN: ContextVar[Overlap | None] = ContextVar("kinflow_registration_run", default=None)


def _seeded(row: SubworkflowEntry) -> bool:
    """A row whose child a spawn was to create (a queued row gets none yet)."""
    return row.seed is not None and not row.queued
