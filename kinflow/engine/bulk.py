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
skipped. The heartbeat finishes what each committed batch owes (its hop,
materialising, propagation) but not the call's remaining rows: their intent
is the caller's, and only the retry carries it. Without a caller key the call
draws one, so its own batches stay exactly-once; a plain re-call is still
safe for redrive, since redriven rows are live and no longer eligible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kinflow.core import bulk, redrive
from kinflow.core.context import Actor, PlanContext
from kinflow.core.mutation import Mutation
from kinflow.core.state import Instance
from kinflow.engine import ids
from kinflow.engine.transact import heavy

if TYPE_CHECKING:
    from kinflow.engine.driving import Driver
    from kinflow.engine.transact import Transactor


class BulkRunner:
    """Runs bulk cohort verbs for one engine."""

    def __init__(self, transact: Transactor, driver: Driver) -> None:
        self.transact = transact
        self.driver = driver

    async def redrive(self, parent_id: str, activity: str, where: bulk.CohortFilter | None,
                      idempotency_key: str | None, actor: Actor) -> bulk.BulkResult:
        """``redriveCohort`` (core/redrive.py)."""
        t = self.transact
        verb = redrive.Redrive(activity, where, idempotency_key or f"bulk-{ids.random_key()}",
                               keyed=idempotency_key is not None)
        state = await t.load(parent_id, None)

        def select(ctx: PlanContext) -> list[str]:
            return redrive.plan_select(state, verb, ctx)

        selected: list[str] = await t.plan(select, actor, None, t.clock(),
                                           offload=heavy(state))
        result = bulk.BulkResult(matched=len(selected))
        for number, keys in enumerate(bulk.batches(selected, t.limits.bulk_batch)):
            if number:
                t.faults.check("mid-bulk")

            def batch(s: Instance, ctx: PlanContext, keys: list[str] = keys) -> Mutation:
                return redrive.plan_batch(s, verb, keys, ctx)

            mutation = await t.commit(parent_id, batch, verb="redriveCohort", actor=actor)
            result.add(mutation.result)
            await self.driver.cascade(mutation, actor)
        return result
