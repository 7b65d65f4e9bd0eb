"""Open-range batch reads happen outside the commit's transaction.

A registration batch normally reads a bounded ``(_type, _id)`` range after its
checkpoint (engine/registration.py). The first batch of a spawn has no key to
start from, and a ``forEach`` without a ``_type`` has no ranges at all: those
batches read the open range, and the embedded lake decodes every document of
that range before it applies the limit (about 55 s for a million documents of
one type). Read inside the spawn's transaction, that outlived the operation
timeout, failed the start as ``lake-unavailable``, and held the transaction
open for the whole scan.

So a commit that meets such a read stops its transaction attempt
(``ReadOutside``), reads the batch outside any transaction with a deadline of
its own (``OPEN_READ_TIMEOUT``), and runs the transaction again with the batch
in hand. The batch is the same one the plan would have read inside: membership
is fixed by the batch's ``at``, taken when it is read, and a plan re-run with it
registers exactly those rows. Only ``Transactor.commit`` does this
(``committing``); other callers of the planner read in place as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from kinflow.core.cohort import batches
from kinflow.core.context import BatchRequest, NeedsRowBatch, RowBatch
from kinflow.engine.registration import read_batch

if TYPE_CHECKING:
    from kinflow.engine.transact import Transactor

T = TypeVar("T")
OPEN_READ_TIMEOUT = 600.0  # seconds one open-range read may take (a million documents: ~1 min)
_OUTSIDE_READS = 4  # open-range reads one commit makes at most (a spawn's cohorts)
_HELD: ContextVar[dict[str, RowBatch] | None] = ContextVar("kinflow_held_batches", default=None)


class ReadOutside(Exception):
    """A plan inside a transaction needs an open-range batch: read it outside, then retry."""

    def __init__(self, request: BatchRequest) -> None:
        super().__init__(request.query)
        self.request = request


def reads_open_range(request: BatchRequest) -> bool:
    """Whether the batch reads the open range (no checkpoint key, or no pinned type)."""
    return request.after is None or batches.pinned_type(request.query, request.params) is None


async def batch_for(transact: Transactor, need: NeedsRowBatch, now: datetime,
                    in_transaction: bool) -> RowBatch:
    """The batch a plan asks for: one read outside this commit's transaction when held,
    else ``ReadOutside`` for an open-range read inside ``committing``, else read here."""
    held = _HELD.get()
    if held is not None and need.cache_key in held:
        return held[need.cache_key]
    if held is not None and in_transaction and reads_open_range(need.request):
        raise ReadOutside(need.request)
    return await read_batch(transact.lake, transact.dataset, need.request, now, transact)


async def committing(transact: Transactor, run: Callable[[], Awaitable[T]]) -> T:
    """``run`` (one transaction); each open-range batch it meets is read outside it first."""
    held: dict[str, RowBatch] = {}
    token = _HELD.set(held)
    try:
        for _ in range(_OUTSIDE_READS):
            try:
                return await run()
            except ReadOutside as need:
                held[need.request.key] = await read_batch(
                    transact.lake, transact.dataset, need.request, transact.clock(), transact,
                    open_timeout=OPEN_READ_TIMEOUT)
        _HELD.set(None)  # past the bound: the rest is read in place
        return await run()
    finally:
        _HELD.reset(token)
