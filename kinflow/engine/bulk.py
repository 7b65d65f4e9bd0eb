"""Running a bulk cohort verb: select once, then apply in batched, keyed commits.

``core/cohort/selection.py`` says which rows and under which keys; the verb's pure
planners (``core/cohort/redrive.py`` for ``redriveCohort``) say what a select and a
batch do. This module is the loop around them: one selection on the loaded
parent (every refusal of the whole call happens here, before anything is
applied), then one fenced commit of the parent per ``limits.bulk_batch``
rows, each driven to rest like any verb (its hop, children it must settle,
propagation). A batch re-checks every row against the state it commits on,
so a row that another call or a child changed in between is skipped.

Resumption: every row applied carries its derived key ``<key>:<rowKey>``
in the same commit, so a call interrupted between batches (a crash, the
``mid-bulk`` fault point) is finished by retrying it with the same key:
the retry applies only the rows not yet marked and reports the others as
skipped. The heartbeat finishes it too: every batch but the last records the
call on the parent (``bulkCalls``: op, key, activity, filter, actor) with the
indexed hint ``owesBulk``, the last batch forgets it, and the worker runs a
recorded call again under its key (``finish``), which applies exactly the
rows still unmarked. Without a caller key the call draws one and records it
the same way, so its batches stay exactly-once whoever finishes them.

``fireCohort`` (core/cohort/selection.py) is shaped differently: its rows' children
are separate instances, so a batch fires each child with its own fenced
update, keyed by the derived key in the child's ledger (the batch's children
in ``FIRE_TRANSACTIONS`` lake transactions), then marks the batch's rows in
one commit of the parent. The
call is recorded on the parent before the first child is fired, so a crash
among the children's commits leaves it owed too; a retry skips marked rows
without asking their child, and a child fired but not yet marked replays.
``abortCohort`` and ``cancelCohort`` end rows in the parent's batch commits,
like a redrive; the drain (``Driver.cascade``) carries the aborts out. A
closing one (no filter) on a sparse parent that pages selects nothing: one
commit closes the cohort and records a sweep of it (``bulk.plan_close_paged``,
core/cohort/sweep.py), and the drain ends its rows a page of chunks per commit.

On a sparse parent no step walks the registry: the selection reads the cohort's
chunks a page at a time (``sweeps.page_size``), outside any transaction, each page
planned on its own copy of the parent (``selection.select_page``, every page under
the call's one GROQ budget), and each batch commit names its rows' places and
reads at most a page of chunks (``selection.chunk_batches``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kinflow.core import verbs
from kinflow.core.cohort import bulk, selection, sparse, sweep
from kinflow.core.cohort import redrive as redriving
from kinflow.core.context import Actor, PlanContext
from kinflow.core.errors import InstanceNotFound
from kinflow.core.mutation import Mutation
from kinflow.core.state import INSTANCE_TYPE, BulkCall, Instance, parse_instance
from kinflow.engine import ids, sparse_load, sweeps
from kinflow.engine.transact import Runner, heavy
from kinflow.errors import KinflowError
from kinflow.groq import pool

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession

    from kinflow.engine.driving import Driver
    from kinflow.engine.transact import Transactor

FIRE_TRANSACTIONS = 4
"""Lake transactions a ``fireCohort`` batch's children are fired in, at once: a
transaction per child would pay a transaction's commit (a flush to disk) per child."""
FIRE_CONCURRENCY = 8
"""Fired children driven to rest (hops, propagation) at once."""
MARK_BATCHES = 16
"""``fireCohort`` batches whose rows are marked on the parent in one commit (and the last
batch): each mark commit writes the parent while the fired children's propagation rounds
write it too, so one per batch made the two retry each other's write conflicts."""


def filtered(where: selection.CohortFilter | None, actor: Actor, heavy_state: bool
             ) -> bool | Runner:
    """Where a selection is planned: a GROQ ``where`` (CPU work under one budget for every
    row, ``Limits.groq_budget``) in the acting caller's lane of the GROQ evaluation threads
    (the engine's own lane for the system), a heavy parent in a worker thread, anything
    else on the event loop."""
    if where is not None and where.where is not None:
        caller = None if actor.kind == "system" else actor.key
        return lambda fn: pool.off_loop(fn, None, caller)
    return heavy_state


class BulkRunner:
    """Runs bulk cohort verbs for one engine."""

    def __init__(self, transact: Transactor, driver: Driver) -> None:
        self.transact = transact
        self.driver = driver
        # parents with a bulk call running in this process (the heartbeat leaves them)
        self.now: set[str] = set()

    async def redrive(self, parent_id: str, activity: str, where: selection.CohortFilter | None,
                      idempotency_key: str | None, actor: Actor) -> selection.BulkResult:
        """``redriveCohort`` (core/cohort/redrive.py)."""
        verb = redriving.Redrive(activity, where, idempotency_key or f"bulk-{ids.random_key()}",
                               keyed=idempotency_key is not None)
        return await self._run(parent_id, verb, actor)

    async def _selected(self, parent_id: str, where: selection.CohortFilter | None,
                        actor: Actor, dense: Callable[[Instance, PlanContext], list[str]],
                        page: Callable[[Instance, PlanContext, list[int], Any],
                                       tuple[list[int], list[selection.Seen]]]
                        ) -> tuple[list[str], dict[str, int] | None]:
        """The selected row keys, and on a sparse parent their places: its first plan
        makes every refusal of the call and names the cohort's chunks, then one plan per
        page of them (read outside any transaction) says which rows it selects."""
        t = self.transact
        state = await t.load(parent_id, None)
        where_lane = filtered(where, actor, heavy(state))
        if not sparse.is_sparse(state):
            selected: list[str] = await t.plan(lambda ctx: dense(state, ctx), actor, None,
                                               t.clock(), offload=where_lane, state=state)
            return selected, None
        budget = t.limits.groq_budget()  # the call's rows share one budget, as dense
        now = t.clock()
        chunks, _ = await t.plan(lambda ctx: page(state, ctx, [], budget), actor, None, now,
                                 state=state)
        pages: list[list[selection.Seen]] = []
        for part in sweeps.pages(chunks, t.limits):
            copy = sparse_load.private(state)
            await t.rows.hold(copy, set(part))

            def plan(ctx: PlanContext, copy: Instance = copy, part: list[int] = part
                     ) -> tuple[list[int], list[selection.Seen]]:
                return page(copy, ctx, part, budget)

            _, seen = await t.plan(plan, actor, None, now, offload=where_lane, state=copy)
            pages.append(seen)
        keys, places = selection.merged(pages)
        return keys, places

    def _groups(self, keys: list[str], places: dict[str, int] | None) -> list[list[str]]:
        """The batches of a selection (on a sparse parent, at most a page of chunks each);
        one (empty) even for an empty selection: it forgets a call recorded before."""
        t = self.transact
        if places is None:
            return list(selection.batches(keys, t.limits.bulk_batch)) or [[]]
        return selection.chunk_batches(keys, places, t.limits.bulk_batch,
                                       sweeps.page_size(t.limits)) or [[]]

    async def _run(self, parent_id: str, verb: redriving.Redrive, actor: Actor
                   ) -> selection.BulkResult:
        t = self.transact
        selected, places = await self._selected(
            parent_id, verb.where, actor,
            lambda s, ctx: redriving.plan_select(s, verb, ctx),
            lambda s, ctx, chunks, budget: redriving.plan_select_page(s, verb, ctx, chunks,
                                                                      budget))
        result = selection.BulkResult(matched=len(selected))
        groups = self._groups(selected, places)
        self.now.add(parent_id)
        try:
            for number, keys in enumerate(groups):
                if number:
                    t.faults.check("mid-bulk")
                last = number == len(groups) - 1

                def batch(s: Instance, ctx: PlanContext, keys: list[str] = keys,
                          last: bool = last) -> Mutation:
                    return redriving.plan_batch(s, verb, keys, ctx, last=last, places=places)

                mutation = await t.commit(parent_id, batch, verb="redriveCohort", actor=actor)
                result.add(mutation.result)
                await self.driver.cascade(mutation, actor)
        finally:
            self.now.discard(parent_id)
        return result

    async def finish(self, parent_id: str, actor: Actor) -> int:
        """Finish the bulk calls a crash interrupted between batches (the heartbeat's
        ``owesBulk``), each under its own key; a call that can no longer apply (its
        parent moved on) is forgotten. Returns how many calls it finished."""
        t = self.transact
        state = await t.load(parent_id, None)
        finished = 0
        for call in list(state.bulkCalls or []):
            if call.op != redriving.OP and call.op not in bulk.OPS:
                continue
            who = Actor(call.actor.kind, call.actor.id, tuple(call.actor.roles)) \
                if call.actor is not None else actor
            try:
                await self._again(parent_id, call, who)
            except KinflowError:
                await t.commit(parent_id, lambda s, c, o=call: _forget(s, o, c),
                               verb=call.op, actor=actor)
                continue
            finished += 1
        return finished

    async def _again(self, parent_id: str, call: BulkCall, actor: Actor) -> None:
        if call.op == redriving.OP:
            await self._run(parent_id, redriving.Redrive.of_call(call), actor)
        elif call.op == bulk.FIRE:
            await self._fire(parent_id, bulk.CohortCall.of_call(call), actor)
        else:
            await self._end(parent_id, bulk.CohortCall.of_call(call), actor)

    # ---- fireCohort, abortCohort, cancelCohort (core/cohort/selection.py) ----

    async def fire(self, parent_id: str, activity: str, where: selection.CohortFilter | None,
                   child_activity: str, action: str, params: dict[str, Any] | None,
                   idempotency_key: str | None, actor: Actor) -> selection.BulkResult:
        """``fireCohort``: ``action`` of ``child_activity`` on each matching live child."""
        call = bulk.CohortCall(bulk.FIRE, activity, where, *_key(idempotency_key),
                                     child_activity=child_activity, action=action,
                                     params=params)
        return await self._fire(parent_id, call, actor)

    async def end(self, op: str, parent_id: str, activity: str,
                  where: selection.CohortFilter | None, reason: str | None,
                  idempotency_key: str | None, actor: Actor) -> selection.BulkResult:
        """``abortCohort`` or ``cancelCohort`` (``op``); without a filter it closes the
        cohort."""
        call = bulk.CohortCall(op, activity, where, *_key(idempotency_key),
                                     reason=reason)
        return await self._end(parent_id, call, actor)

    async def _select(self, parent_id: str, call: bulk.CohortCall, actor: Actor
                      ) -> tuple[list[str], dict[str, int] | None]:
        return await self._selected(
            parent_id, call.where, actor, lambda s, ctx: bulk.plan_select(s, call, ctx),
            lambda s, ctx, chunks, budget: bulk.plan_select_page(s, call, ctx, chunks, budget))

    async def _fire(self, parent_id: str, call: bulk.CohortCall, actor: Actor
                    ) -> selection.BulkResult:
        t = self.transact
        selected, places = await self._select(parent_id, call, actor)
        result = selection.BulkResult(matched=len(selected))
        groups = [g for g in self._groups(selected, places) if g]
        self.now.add(parent_id)
        try:
            if groups:
                state = (await t.commit(
                    parent_id, lambda s, c: bulk.plan_open(s, call, c),
                    verb=call.op, actor=actor)).instance
            took: list[str] = []  # fired on, not yet marked on the parent
            for number, keys in enumerate(groups or [[]]):
                if number:
                    t.faults.check("mid-bulk")
                if keys:

                    own = sparse_load.private(state)  # (the rows a page reads)

                    def targets(ctx: PlanContext, keys: list[str] = keys,
                                state: Instance = own
                                ) -> tuple[list[bulk.Target], int]:
                        return bulk.fire_targets(state, call, keys, ctx, places)

                    chosen, skipped = await t.plan(targets, actor, None, t.clock(),
                                                   state=own)
                    result.skipped += skipped
                    took += await self._fire_children(chosen, call, actor, result)
                last = number >= len(groups) - 1
                if not last and (number + 1) % MARK_BATCHES:
                    continue

                def marks(s: Instance, ctx: PlanContext, took: list[str] = took,
                          last: bool = last) -> Mutation:
                    return bulk.plan_marks(s, call, took, ctx, last=last, places=places)

                state = (await t.commit(parent_id, marks, verb=call.op, actor=actor)).instance
                took = []
        finally:
            self.now.discard(parent_id)
        return result

    async def _fire_children(self, targets: list[bulk.Target],
                             call: bulk.CohortCall, actor: Actor,
                             result: selection.BulkResult) -> list[str]:
        """Fire on each target's child, every child its own fenced update, the batch in
        ``FIRE_TRANSACTIONS`` lake transactions at once; the row keys whose child took the
        fire (in this call or an earlier one under the same key)."""
        size = max(1, -(-len(targets) // FIRE_TRANSACTIONS))
        parts = [targets[i:i + size] for i in range(0, len(targets), size)]
        fired = await asyncio.gather(*(self._fire_part(part, call, actor) for part in parts))
        took: list[str] = []
        done: list[Mutation] = []
        for target, outcome in (pair for part in fired for pair in part):
            if isinstance(outcome, KinflowError):
                if bulk.not_eligible(outcome):
                    result.skipped += 1
                else:
                    result.refusals.append(selection.BulkRefusal(
                        target.child_id, target.row_key, outcome.code, str(outcome)))
                continue
            took.append(target.row_key)
            if outcome.replay:
                result.skipped += 1
            else:
                result.applied += 1
                done.append(outcome)
        gate = asyncio.Semaphore(FIRE_CONCURRENCY)

        async def rest(mutation: Mutation) -> None:
            async with gate:
                await self.transact.after_commit(mutation)
                try:  # the fire is committed: a cascade that stops is the heartbeat's
                    await self.driver.cascade(mutation, actor)
                except KinflowError:
                    pass

        await asyncio.gather(*(rest(m) for m in done))
        return took

    async def _fire_part(self, targets: list[bulk.Target], call: bulk.CohortCall,
                         actor: Actor) -> list[tuple[bulk.Target, Mutation | KinflowError]]:
        """One lake transaction firing on ``targets``' children: each child read, planned
        (``plan_fire_action`` under its derived key) and written like a verb's commit; a
        child that refuses is left untouched and its refusal returned in its place."""
        t = self.transact
        outcomes: list[tuple[bulk.Target, Mutation | KinflowError]] = []

        async def callback(session: AsyncClientSession) -> None:
            outcomes.clear()  # a write conflict runs the whole transaction again
            now = t.clock()
            found = await t.lake.get_many([x.child_id for x in targets], dataset=t.dataset,
                                          session=session)
            for target in targets:
                document = found.get(target.child_id)
                if document is None or document.get("_type") != INSTANCE_TYPE:
                    outcomes.append((target, InstanceNotFound(
                        f"no instance {target.child_id!r}", instanceId=target.child_id)))
                    continue
                state = parse_instance(document)
                if state.rowCount:
                    await t.rows.attach(state, session)
                verb = verbs.FireAction(call.child_activity or "", call.action or "",
                                        call.params, selection.row_key(call.key, target.row_key))

                def fire(ctx: PlanContext, state: Instance = state,
                         verb: verbs.FireAction = verb) -> Mutation:
                    return verbs.plan_fire_action(state, verb, ctx)

                try:
                    mutation: Mutation = await t.plan(fire, actor, session, now)
                    if mutation.dirty:
                        await t.write(mutation, state.rev_, session, now)
                except KinflowError as error:
                    outcomes.append((target, error))
                    continue
                outcomes.append((target, mutation))

        await t.lake.transaction(callback, verb="fireAction")
        return list(outcomes)

    async def _end(self, parent_id: str, call: bulk.CohortCall, actor: Actor
                   ) -> selection.BulkResult:
        t = self.transact
        if call.closes and sweep.pages(await t.load(parent_id, None)):
            # a sparse parent: a sweep of the cohort, drained a page per commit
            closing = await t.commit(parent_id, lambda s, c: bulk.plan_close_paged(s, call, c),
                                     verb=call.op, actor=actor)
            await self.driver.cascade(closing, actor)
            paged: selection.BulkResult = closing.result
            return paged
        selected, places = await self._select(parent_id, call, actor)
        result = selection.BulkResult(matched=len(selected))
        groups = self._groups(selected, places)
        done: set[str] = set()  # a closing first batch ends every queued row at once
        self.now.add(parent_id)
        try:
            for number, group in enumerate(groups):
                if number:
                    t.faults.check("mid-bulk")

                keys = [k for k in group if k not in done]

                def batch(s: Instance, ctx: PlanContext, keys: list[str] = keys,
                          first: bool = number == 0,
                          last: bool = number == len(groups) - 1) -> Mutation:
                    return bulk.plan_end_batch(s, call, keys, ctx, first=first, last=last,
                                               places=places)

                mutation = await t.commit(parent_id, batch, verb=call.op, actor=actor)
                result.add(mutation.result.result)
                done |= mutation.result.applied
                await self.driver.cascade(mutation, actor)  # drains the condemned rows
        finally:
            self.now.discard(parent_id)
        return result


def _key(given: str | None) -> tuple[str, bool]:
    """The call's key and whether the caller gave it (else one is drawn for it)."""
    return (given, True) if given is not None else (f"bulk-{ids.random_key()}", False)


def _forget(state: Instance, call: BulkCall, ctx: PlanContext) -> Mutation:
    if call.op == redriving.OP:
        return redriving.plan_forget(state, redriving.Redrive.of_call(call), ctx)
    return bulk.plan_forget(state, bulk.CohortCall.of_call(call), ctx)
