"""Driving an instance after a verb: hops, child settlement, condemned drains, propagation.

After a verb's own commit the shell drives the cascade, one commit per hop,
until a hop moves nothing (``cascade-limit`` after ``limits.cascade_moves``
moves). Subworkflows (docs/subworkflows.md): children whose first hop the
plan could not run are cascaded before the parent reacts; every hop first
drains owed aborts and stamps what it observes about children; after a verb,
a child that changed asks its parent for a propagation round
(``propagation.Propagator``). Fault points (``faults.Faults``) sit at each
step of the crash windows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kinflow.core import cancellation, operator_verbs, verbs
from kinflow.core.cancel_instance import CancelInstance, plan_cancel
from kinflow.core.cohort import sparse, sweep, window
from kinflow.core.cohort.observe import (
    FINISHED,
    OBSERVATION_FIELDS,
    Observation,
    condemned,
    expected_live,
    expects_child,
    live_rows,
)
from kinflow.core.commit import live_count
from kinflow.core.context import Actor, PlanContext
from kinflow.core.errors import ActionDisabled, CascadeLimit, InstanceNotFound
from kinflow.core.mutation import Mutation
from kinflow.core.readmodel import live_children_filter
from kinflow.core.state import Instance, SubworkflowEntry
from kinflow.engine import sweeps
from kinflow.engine.group import Grouper
from kinflow.engine.indexes import INSTANCES
from kinflow.engine.materialise import existing_ids
from kinflow.engine.propagation import Propagator, Reaction
from kinflow.engine.stamps import Stamps
from kinflow.engine.transact import Gather, Planner, Transactor
from kinflow.observability import engine as observing

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession

_CHEAP_MISSING_CHECK = 256  # live rows up to which every hop looks for missing children


@dataclass(slots=True)
class OperationResult:
    """What every mutating verb returns (the API's ``OperationResult``)."""

    instance: Instance
    changed: bool
    cascaded: int
    next_evaluation_at: str | None = None


class Driver:
    """Runs verbs to rest: the verb's commit, its cascade, settlement and propagation."""

    def __init__(self, transact: Transactor, *, propagation: str = "auto") -> None:
        self.transact = transact
        # "auto": a verb on a child of a small cohort returns after its parent reacted
        # (the reference's contract); in a large cohort it returns after its own commits
        # and the parent reacts in paced, coalesced rounds. "inline"/"background" force one
        self.propagator = Propagator(  # each round a trace of its own (docs/observability.md)
            lambda parent: observing.propagation_round(parent, self.round(parent)),
            mode=propagation)
        self.grouper: Grouper | None = None  # group commit of concurrent verbs (engine/group.py)

    async def verb(self, instance_id: str, name: str, actor: Actor | None, planner: Planner,
                   *, cascade: bool = True) -> OperationResult:
        actor = actor or Actor.system()
        if planner is verbs.plan_hop:
            mutation = await self.hop(instance_id, name, actor, check_missing=name == "tick")
        elif self.grouper is not None:
            mutation = await self.grouper.commit(instance_id, planner, verb=name, actor=actor)
        else:
            mutation = await self.transact.commit(instance_id, planner, verb=name, actor=actor)
        if not cascade:
            return OperationResult(mutation.instance, mutation.changed, 0,
                                   mutation.instance.nextEvaluationAt)
        return await self.cascade(mutation, actor)

    async def hop(self, instance_id: str, name: str, actor: Actor, *,
                  check_missing: bool = False) -> Mutation:
        """One cascade hop that first stamps what the instance's children did."""

        async def gather(state: Instance, session: AsyncClientSession) -> list[Observation]:
            return await self._gather_children(state, session, check_missing,
                                               stamps=check_missing or name == "propagate")

        return await self.transact.commit(instance_id, verbs.plan_hop, verb=name, actor=actor,
                                          gather=gather)

    async def _gather_children(self, state: Instance, session: AsyncClientSession,
                               check_missing: bool, *, stamps: bool = False
                               ) -> list[Observation]:
        """Children owing this instance a stamp, and (on a tick) live rows whose child is gone.

        Reads only the children that changed (their ``propagateTo`` names this
        instance). Every hop of a parent with a small live cohort, and every tick,
        also counts the live children by index and reads their ids only when the
        count says a document is missing; for large cohorts only ticks pay for
        that count, which costs in proportion to the cohort.
        """
        t = self.transact
        owed = await t.lake.find({**INSTANCES, "propagateTo": state.id_}, dataset=t.dataset,
                                 session=session,
                                 projection=observing.with_trace(OBSERVATION_FIELDS))
        if stamps or state.subworkflows:  # and those a group commit noted (engine/stamps.py)
            owed += await Stamps(t.lake, t.dataset).children(state.id_, owed, session)
        observing.observed(owed)  # traced: this commit links to the commits that owed them
        seen = [Observation.of(doc) for doc in owed]
        if sparse.is_sparse(state):  # counted from the summary; walked only if one is gone
            if not check_missing:
                return seen
            present = await t.lake.count({**INSTANCES, **live_children_filter(state.id_)},
                                         dataset=t.dataset, session=session)
            finishing = sum(1 for o in seen if o.status in FINISHED)
            deficit = window.live_children(state) - finishing - present
            if deficit <= 0:
                return seen
            return seen + await self._missing(state, seen, deficit, session)
        live = live_rows(state)
        if not live or (not check_missing and len(live) > _CHEAP_MISSING_CHECK):
            return seen
        present = await t.lake.count({**INSTANCES, **live_children_filter(state.id_)},
                                     dataset=t.dataset, session=session)  # fmt: skip
        if present >= len(expected_live(state, seen)):
            return seen
        exists = await existing_ids(t.lake, t.dataset, [r.child_id for r in live], session)
        seen.extend(Observation.missing(r.child_id) for r in live if r.child_id not in exists)
        return seen

    async def _missing(self, state: Instance, seen: list[Observation], deficit: int,
                       session: AsyncClientSession) -> list[Observation]:
        """The live rows of a sparse parent whose child is gone, each with its place: the
        chunks the summary says hold live rows, a page at a time (each page's rows read
        into a copy of their own, so the commit holds only the rows it stamps), until
        ``deficit`` are found or the pages end."""
        t = self.transact
        told = {o.child_id for o in seen}
        gone: list[Observation] = []
        for part in sweeps.pages(sparse.live_chunks(state), t.limits):
            live = [(place, row) for place, row in await sweeps.owed_rows(
                        t, state, part, lambda row: expects_child(state, row), session)
                    if row.child_id not in told]
            exists = await existing_ids(t.lake, t.dataset, [r.child_id for _, r in live],
                                        session)
            gone += [replace(Observation.missing(row.child_id), place=place)
                     for place, row in live if row.child_id not in exists]
            if len(gone) >= deficit:
                break
        return gone

    async def cascade(self, first: Mutation, actor: Actor, *, propagate: bool = True
                      ) -> OperationResult:
        """Drive hops after a verb's commit until one moves nothing, then propagate."""
        limit = self.transact.limits.cascade_moves
        moves, changed, last = first.moves, first.changed, first
        instance_id = first.instance.id_
        owed = await self._settle(first, actor)
        while (last.moves or owed) and not last.instance.terminal:
            if moves >= limit:
                raise CascadeLimit(
                    f"instance {instance_id!r} moved {moves} times in one cascade",
                    instanceId=instance_id, limit=limit, stage=last.instance.currentStage,
                )
            await self.drain_condemned(last.instance, actor)
            await self.drain_cancels(last.instance, actor)
            last = await self.hop(instance_id, "cascade", actor)
            moves += last.moves
            changed = changed or last.changed
            owed = await self._settle(last, actor)
        instance = last.instance
        if instance.owesAborts:  # a terminal move condemned onExit cohorts; drain them too
            instance = await self.drain_condemned(instance, actor)
        if instance.owesCancels:  # a cancellation (or onExit: cancel) owes requests
            instance = await self.drain_cancels(instance, actor)
        if propagate:
            await self.after(instance, first.instance)
        return OperationResult(instance, changed, moves, instance.nextEvaluationAt)

    async def _settle(self, mutation: Mutation, actor: Actor) -> bool:
        """Cascade the children a spawn could not settle in its plan (they spawn too)."""
        if not mutation.settle:
            return False
        for child_id in mutation.settle:
            self.transact.faults.check("before-child-settle")
            first = await self.hop(child_id, "cascade", actor)
            await self.cascade(first, actor, propagate=False)
        self.transact.faults.check("before-batch-stamp")
        return True

    async def after(self, instance: Instance, first: Instance | None = None) -> None:
        """A child whose parent is owed a stamp asks for a propagation round: by its hint,
        or by the hint of the verb's ``first`` commit (a group commit keeps it in memory
        only, engine/stamps.py, so a hop after it does not read it back)."""
        parent = instance.propagateTo or (first.propagateTo if first is not None else None)
        if parent is None:
            return
        self.transact.faults.check("before-propagation")
        await self.propagator.request(parent)

    async def round(self, parent_id: str) -> Reaction:
        """One propagation round: stamp the parent's rows, cascade it, propagate further.

        Reports the parent's live rows after it (the propagator sizes its cohort by
        it) and, while a window has rows queued, how many finished children make
        the next round worth running at once.
        """
        t = self.transact
        try:
            result = await self.verb(parent_id, "propagate", Actor.system(), verbs.plan_hop)
        except InstanceNotFound:  # the parent is gone: the children stop telling it
            await t.lake.update_many({**INSTANCES, "propagateTo": parent_id},
                                     {"$unset": {"propagateTo": "", "propagateToken": ""}},
                                     dataset=t.dataset, now=t.clock())  # fmt: skip
            await Stamps(t.lake, t.dataset).drop(parent_id)
            return Reaction(live=0)
        instance = result.instance
        live = live_count(instance)
        refill = window.refill_batch(instance, instance.definition_model()) if live else None
        return Reaction(live=live, refill=refill)

    async def drain_condemned(self, instance: Instance, actor: Actor,
                              visited: set[str] | None = None) -> Instance:
        """Carry out aborts owed to condemned children, depth-first, then stamp them."""
        if sparse.is_sparse(instance):  # its flag is exact: walk the rows only when owed
            if not instance.owesAborts:
                return instance
            if sweep.pages(instance):  # a page of chunks at a time (engine/sweeps.py)
                return await sweeps.drain_aborts(self, instance, actor, visited)
            instance = await self.transact.walkable(instance)
        return await self.abort_rows(instance, [(None, row) for row in condemned(instance)],
                                     actor, visited)

    async def abort_rows(self, instance: Instance,
                         rows: Sequence[tuple[int | None, SubworkflowEntry]], actor: Actor,
                         visited: set[str] | None = None) -> Instance:
        """Abort the children of condemned ``rows`` (with their places when known),
        depth-first, then stamp the rows in one commit of ``instance``."""
        if not rows:
            return instance
        t = self.transact
        t.faults.check("before-drain")
        visited = visited if visited is not None else set()
        visited.add(instance.id_)
        for _, row in rows:
            child_id = row.child_id
            if child_id in visited:
                continue
            assert row.abortPending is not None
            verb = operator_verbs.AbortInstance(row.abortPending.reason)

            def abort(state: Instance, ctx: PlanContext,
                      verb: operator_verbs.AbortInstance = verb) -> Mutation:
                return operator_verbs.plan_abort(state, verb, ctx)

            try:
                aborted = await t.commit(child_id, abort, verb="abortInstance", actor=actor)
            except InstanceNotFound:
                continue
            await self.drain_condemned(aborted.instance, actor, visited)
        t.faults.check("before-drain-stamp")  # children aborted, rows not stamped yet
        gather = self._observing(rows)
        try:
            stamped = await t.commit(instance.id_, verbs.plan_observe, verb="drain", actor=actor,
                                     gather=gather)
        except InstanceNotFound:
            return instance
        return stamped.instance

    def _observing(self, rows: Sequence[tuple[int | None, SubworkflowEntry]]) -> Gather:
        """A commit's read of the rows' children in its transaction: one observation per
        child, a missing one for a child that is gone (the drains' stamps resolve its row,
        found by its place when known: a sparse parent reads only that chunk)."""
        t = self.transact
        ids = [row.child_id for _, row in rows]

        async def gather(state: Instance, session: AsyncClientSession) -> list[Observation]:
            found = await t.lake.find({"_id": {"$in": ids}}, dataset=t.dataset,
                                      session=session, projection=OBSERVATION_FIELDS)
            by_id = {str(doc["_id"]): doc for doc in found}
            return [Observation.of(by_id[row.child_id]) if row.child_id in by_id
                    else replace(Observation.missing(row.child_id), place=place)
                    for place, row in rows]

        return gather

    async def drain_cancels(self, instance: Instance, actor: Actor) -> Instance:
        """Ask each child owed a cancel request to cancel (each through ``plan_cancel``,
        driven to rest: its own children are asked in turn), then stamp their rows in one
        hop of this instance, which ends its cancellation if nothing is left to wait for.

        Crash-safe like the abort drain: the rows' ``cancelPending`` and the instance's
        ``owesCancels`` stay until the stamp reads each child cancelling or finished, and
        a repeated request to a child already cancelling changes nothing.
        """
        if sparse.is_sparse(instance):
            if not instance.owesCancels:
                return instance
            if sweep.pages(instance):  # a page of chunks at a time (engine/sweeps.py)
                return await sweeps.drain_cancels(self, instance, actor)
            instance = await self.transact.walkable(instance)
        return await self.cancel_rows(
            instance, [(None, row) for row in cancellation.owed(instance)], actor)

    async def cancel_rows(self, instance: Instance,
                          rows: Sequence[tuple[int | None, SubworkflowEntry]], actor: Actor
                          ) -> Instance:
        """Ask the children of ``rows`` to cancel, then stamp the rows in one hop."""
        if not rows:
            return instance
        t = self.transact
        t.faults.check("before-cancel-children")
        for _, row in rows:
            assert row.cancelPending is not None
            verb = CancelInstance(row.cancelPending.reason)

            def cancel(state: Instance, ctx: PlanContext,
                       verb: CancelInstance = verb) -> Mutation:
                return plan_cancel(state, verb, ctx)

            try:
                told = await t.commit(row.child_id, cancel, verb="cancelInstance", actor=actor)
            except (InstanceNotFound, ActionDisabled):
                continue  # gone or finished meanwhile: the stamp below resolves its row
            await self.cascade(told, actor, propagate=False)
        t.faults.check("before-cancel-stamp")
        gather = self._observing(rows)
        try:
            stamped = await t.commit(instance.id_, verbs.plan_hop, verb="cancelStamp",
                                     actor=actor, gather=gather)
        except InstanceNotFound:
            return instance
        if stamped.moves and not stamped.instance.terminal:
            return (await self.cascade(stamped, actor, propagate=False)).instance
        return stamped.instance
