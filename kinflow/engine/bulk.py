"""Running a bulk cohort verb: select once, then apply in batched, keyed commits.

``core/bulk.py`` says which rows and under which keys; the verb's pure
planners (``core/redrive.py`` for ``redriveCohort``) say what a select and a
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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kinflow.core import bulk
from kinflow.core import redrive as redriving
from kinflow.core.context import Actor, PlanContext
from kinflow.core.mutation import Mutation
from kinflow.core.state import Instance
from kinflow.engine import ids
from kinflow.engine.transact import heavy
from kinflow.errors import KinflowError

if TYPE_CHECKING:
    from kinflow.engine.driving import Driver
    from kinflow.engine.transact import Transactor


class BulkRunner:
    """Runs bulk cohort verbs for one engine."""

    def __init__(self, transact: Transactor, driver: Driver) -> None:
        self.transact = transact
        self.driver = driver
        # parents with a bulk call running in this process (the heartbeat leaves them)
        self.now: set[str] = set()

    async def redrive(self, parent_id: str, activity: str, where: bulk.CohortFilter | None,
                      idempotency_key: str | None, actor: Actor) -> bulk.BulkResult:
        """``redriveCohort`` (core/redrive.py)."""
        verb = redriving.Redrive(activity, where, idempotency_key or f"bulk-{ids.random_key()}",
                               keyed=idempotency_key is not None)
        return await self._run(parent_id, verb, actor)

    async def _run(self, parent_id: str, verb: redriving.Redrive, actor: Actor
                   ) -> bulk.BulkResult:
        t = self.transact
        state = await t.load(parent_id, None)

        def select(ctx: PlanContext) -> list[str]:
            return redriving.plan_select(state, verb, ctx)

        selected: list[str] = await t.plan(select, actor, None, t.clock(),
                                           offload=heavy(state))
        result = bulk.BulkResult(matched=len(selected))
        # one commit even for an empty selection: it forgets a call recorded before
        groups = list(bulk.batches(selected, t.limits.bulk_batch)) or [[]]
        self.now.add(parent_id)
        try:
            for number, keys in enumerate(groups):
                if number:
                    t.faults.check("mid-bulk")
                last = number == len(groups) - 1

                def batch(s: Instance, ctx: PlanContext, keys: list[str] = keys,
                          last: bool = last) -> Mutation:
                    return redriving.plan_batch(s, verb, keys, ctx, last=last)

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
            if call.op != redriving.OP:
                continue
            verb = redriving.Redrive.of_call(call)
            who = Actor(call.actor.kind, call.actor.id, tuple(call.actor.roles)) \
                if call.actor is not None else actor
            try:
                await self._run(parent_id, verb, who)
            except KinflowError:
                await t.commit(parent_id, lambda s, c, v=verb: redriving.plan_forget(s, v, c),
                               verb="redriveCohort", actor=actor)
                continue
            finished += 1
        return finished
