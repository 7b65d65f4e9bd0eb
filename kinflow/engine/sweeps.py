"""The drains of a sparse parent, a page of chunks at a time (core/cohort/sweep.py).

A sparse parent keeps the chunks holding rows owed an abort or a cancel request
(``owedChunks``) and the whole-cohort condemnations still to page (``sweeps``).
The abort drain repeats, until nothing is owed: read the first page of owed
chunks (``sweep.owed_pages``, at most ``page_size`` chunks), abort those rows'
children depth-first and stamp the rows in one commit (``Driver.abort_rows``,
as the dense drain does for every row); when no row is owed, one commit
condemns the next page of the first sweep (``plan_sweep_page``). Every commit
reads a page of chunks, never the registry, so a million-row cohort is aborted
in bounded commits.

Crash-safe at every point: a page condemned is a commit (rows and the sweep's
``next`` together), its rows stay owed in ``owedChunks`` until the stamp that
resolves them, an abort of a child already aborted changes nothing, and a row
is resolved once. ``owesAborts`` stays set meanwhile, so the heartbeat's
``repair`` resumes where the last commit left off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kinflow.core import cancellation, operator_verbs
from kinflow.core.cohort import sparse, sweep
from kinflow.core.cohort.chunks import CHUNK
from kinflow.core.context import Actor, Limits, PlanContext
from kinflow.core.mutation import Mutation
from kinflow.core.state import Instance, SubworkflowEntry
from kinflow.engine import sparse_load

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession

    from kinflow.engine.driving import Driver
    from kinflow.engine.transact import Transactor

PAGE_CHUNKS = 64
"""Chunks (of 32 rows) a drain's page reads at most: 2,048 rows."""

Rows = list[tuple[int, SubworkflowEntry]]


def page_size(limits: Limits) -> int:
    """Chunks per page: ``PAGE_CHUNKS``, within half a commit's bound (the stamp also
    reads the chunks every commit of the parent wants)."""
    return max(1, min(PAGE_CHUNKS, limits.sparse_chunks // 2))


def pages(chunks: list[int], limits: Limits) -> list[list[int]]:
    """``chunks`` in pages of ``page_size`` chunks."""
    size = page_size(limits)
    return [chunks[start:start + size] for start in range(0, len(chunks), size)]


async def owed_rows(t: Transactor, instance: Instance, chunks: list[int],
                    owes: Callable[[SubworkflowEntry], bool],
                    session: AsyncClientSession | None = None) -> Rows:
    """``(place, row)`` of the rows of ``chunks`` that ``owes`` picks, read into a copy of
    their own (outside any transaction without a ``session``: the stamp commit reads the
    rows again in its own)."""
    copy = sparse_load.private(instance)
    await t.rows.hold(copy, set(chunks), session)
    wanted = set(chunks)
    return [(place, row) for place, row in sparse.held_rows(copy)
            if place // CHUNK in wanted and owes(row)]


async def condemn_page(driver: Driver, instance: Instance, actor: Actor) -> Instance:
    """One commit condemning the next page of the parent's first sweep."""
    size = page_size(driver.transact.limits)

    def plan(state: Instance, ctx: PlanContext) -> Mutation:
        return operator_verbs.plan_sweep_page(state, ctx, size)

    return (await driver.transact.commit(instance.id_, plan, verb="condemnPage",
                                         actor=actor)).instance


async def drain_aborts(driver: Driver, instance: Instance, actor: Actor,
                       visited: set[str] | None) -> Instance:
    """Carry out a sparse parent's owed aborts and sweeps, a page per commit."""
    t = driver.transact
    size = page_size(t.limits)
    last: list[int] | None = None
    while True:
        chunks = sweep.owed_pages(instance, sweep.ABORTS, size)
        if chunks:
            if chunks == last:  # nothing resolved by the last page: the heartbeat retries
                return instance
            last = chunks
            rows = await owed_rows(t, instance, chunks, sweep.owes_abort)
            instance = await driver.abort_rows(instance, rows, actor, visited)
        elif instance.sweeps:
            last = None
            instance = await condemn_page(driver, instance, actor)
            t.faults.check("mid-sweep")
        else:
            return instance


async def drain_cancels(driver: Driver, instance: Instance, actor: Actor) -> Instance:
    """Make a sparse parent's owed cancel requests, a page per commit."""
    t = driver.transact
    size = page_size(t.limits)
    last: list[int] | None = None
    while True:
        chunks = sweep.owed_pages(instance, sweep.CANCELS, size)
        if not chunks or chunks == last:
            return instance
        last = chunks
        rows = await owed_rows(t, instance, chunks, cancellation.owes)
        instance = await driver.cancel_rows(instance, rows, actor)
        if not sparse.is_sparse(instance) or instance.terminal:
            return instance
