"""``Engine``: the workflow engine's verbs over one lake dataset.

A thin facade: each verb names its planner (``kinflow.core.verbs``) and hands
it to the shell. ``transact`` commits plans (one transaction, one clock
reading, writes only through ``Lake``), ``driving`` runs a verb to rest
(cascade, child settlement, condemned drains, propagation), ``materialise``
creates the children a large spawn could not create in its transaction,
``drain`` runs effects and ``reads`` serves definitions, instances and GROQ.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kinflow.core import verbs
from kinflow.core.bulk import BulkResult, CohortFilter
from kinflow.core.bulk_verbs import ABORT as ABORT_COHORT
from kinflow.core.bulk_verbs import CANCEL as CANCEL_COHORT
from kinflow.core.cancel import CancelInstance, plan_cancel
from kinflow.core.context import Actor, Limits
from kinflow.core.errors import InstanceNotFound
from kinflow.core.gates import Verdict
from kinflow.core.mutation import Mutation
from kinflow.core.owned import check_instance_id
from kinflow.core.state import Instance
from kinflow.engine import drain, ids
from kinflow.engine.bulk import BulkRunner
from kinflow.engine.driving import Driver, OperationResult
from kinflow.engine.faults import Faults
from kinflow.engine.indexes import ENGINE_INDEXES
from kinflow.engine.materialise import Materialiser
from kinflow.engine.owing_hint import fold_repair_flags
from kinflow.engine.parking import unpark
from kinflow.engine.propagation import Propagator
from kinflow.engine.reads import DeployOutcome, Reader
from kinflow.engine.transact import Clock, Planner, Transactor
from kinflow.errors import DocumentExists
from kinflow.storage.lake import Lake

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession


def system_clock() -> datetime:
    return datetime.now(UTC)


class Engine:
    """The workflow engine over one lake dataset. All verbs are coroutines."""

    def __init__(
        self,
        lake: Lake,
        *,
        dataset: str | None = None,
        clock: Clock = system_clock,
        limits: Limits | None = None,
        new_key: Callable[[], str] = ids.random_key,
        propagation: str = "auto",
        faults: Faults | None = None,
    ) -> None:
        self.lake = lake
        self.dataset = dataset or lake.default_dataset
        self.clock = clock
        limits = limits or Limits()
        self.limits = replace(limits, budget_clock=limits.budget_clock or time.monotonic)
        self.handlers: dict[str, drain.EffectHandler] = {}
        self.faults = faults or Faults()
        self.transact = Transactor(lake, self.dataset, clock=clock, limits=self.limits,
                                   new_key=new_key, faults=self.faults,
                                   after_commit=self._after_commit)
        self.materialiser = Materialiser(self.transact, self._batch)
        self.driver = Driver(self.transact, propagation=propagation)
        self.reads = Reader(self.transact)
        self.bulk = BulkRunner(self.transact, self.driver)
        self._ready = False

    @property
    def propagator(self) -> Propagator:
        return self.driver.propagator

    @property
    def materialising_now(self) -> set[str]:
        """Parents whose children this process is creating (the heartbeat skips them)."""
        return self.materialiser.now

    @property
    def _kept(self) -> OrderedDict[str, Instance]:
        return self.transact.kept

    async def ensure_ready(self) -> None:
        """Declare the engine's indexes and create the dataset (idempotent)."""
        if self._ready:
            return
        await fold_repair_flags(self.lake, self.dataset)  # before the old indexes go
        await self.lake.declare_indexes(ENGINE_INDEXES)
        await self.lake.ensure_dataset(self.dataset)
        await self.transact.rows.prepare()
        self._ready = True

    def register_handler(self, name: str, handler: drain.EffectHandler) -> None:
        """Run ``handler`` for effects named ``name`` (one handler per name)."""
        self.handlers[name] = handler

    # ------------------------------------------------------------ definitions

    async def deploy(self, definitions: list[Any], *, actor: Actor | None = None
                     ) -> DeployOutcome:
        """Validate and store a batch; all or nothing."""
        await self.ensure_ready()
        return await self.reads.deploy(definitions)

    async def get_definition(self, name: str, version: int | None = None) -> dict[str, Any]:
        return await self.reads.definition(name, version)

    # ------------------------------------------------------------ verbs

    async def start_instance(
        self,
        definition: str,
        *,
        version: int | None = None,
        fields: dict[str, Any] | None = None,
        instance_id: str | None = None,
        context: dict[str, Any] | None = None,
        actor: Actor | None = None,
        ancestors: list[dict[str, Any]] | None = None,
    ) -> OperationResult:
        """Start a run; with an existing ``instance_id`` of the same definition, resume it.

        ``ancestors`` (GDR refs, root first) starts an instance that names a parent
        without being in its registry: the parent records it as an orphan.
        """
        if instance_id:  # never one the engine derives for a child (docs/security.md)
            check_instance_id(instance_id)
        await self.ensure_ready()
        actor = actor or Actor.system()
        document = await self.get_definition(definition, version)
        # the id is chosen once, so re-plans (lake reads) and retries agree on it
        new_id = instance_id or ids.new_instance_id()
        verb = verbs.StartInstance(document, fields, new_id, context, ancestors)

        async def start() -> Mutation:
            return await self.transact.commit(
                new_id, lambda state, ctx: verbs.plan_resume(state, verb, ctx),
                create=lambda ctx: verbs.plan_start(verb, ctx), verb="startInstance",
                actor=actor, always_write=True)

        try:
            mutation = await start()
        except DocumentExists:  # a concurrent start with the same id won: resume it
            mutation = await start()
        return await self.driver.cascade(mutation, actor)

    async def fire_action(self, instance_id: str, activity: str, action: str, *,
                          params: dict[str, Any] | None = None,
                          idempotency_key: str | None = None,
                          actor: Actor | None = None) -> OperationResult:
        verb = verbs.FireAction(activity, action, params, idempotency_key)
        return await self._verb(instance_id, "fireAction", actor,
                                lambda s, c: verbs.plan_fire_action(s, verb, c))

    async def edit_field(self, instance_id: str, field: str, value: Any = None, *,
                         mode: str = "set", scope: str | None = None,
                         activity: str | None = None, idempotency_key: str | None = None,
                         actor: Actor | None = None) -> OperationResult:
        verb = verbs.EditField(field, value, mode.lower(), scope, activity, idempotency_key)
        return await self._verb(instance_id, "editField", actor,
                                lambda s, c: verbs.plan_edit_field(s, verb, c))

    async def complete_effect(self, instance_id: str, effect_key: str, status: str, *,
                              outputs: dict[str, Any] | None = None, error: str | None = None,
                              detail: str | None = None, duration_ms: int | None = None,
                              idempotency_key: str | None = None,
                              actor: Actor | None = None) -> OperationResult:
        verb = verbs.CompleteEffect(effect_key, status.lower(), outputs, error, detail,
                                    duration_ms, idempotency_key)
        return await self._verb(instance_id, "completeEffect", actor,
                                lambda s, c: verbs.plan_complete_effect(s, verb, c))

    async def tick(self, instance_id: str, *, actor: Actor | None = None) -> OperationResult:
        """Re-evaluate: un-park, drain owed aborts, stamp what children did, cascade, propagate."""
        actor = actor or Actor.system()
        state = await self.transact.load(instance_id, None)
        await unpark(self.lake, self.dataset, instance_id)  # a tick is "try again now"
        await self.driver.drain_condemned(state, actor)
        await self.driver.drain_cancels(state, actor)
        return await self._verb(instance_id, "tick", actor, verbs.plan_hop)

    async def abort_instance(self, instance_id: str, *, reason: str | None = None,
                             idempotency_key: str | None = None,
                             actor: Actor | None = None) -> OperationResult:
        verb = verbs.AbortInstance(reason, idempotency_key)
        actor = actor or Actor.system()
        result = await self._verb(instance_id, "abortInstance", actor,
                                  lambda s, c: verbs.plan_abort(s, verb, c), cascade=False)
        # a retried abort of a terminal instance still drains and propagates
        instance = await self.driver.drain_condemned(result.instance, actor)
        await self.driver.after(instance)
        result.instance = instance
        return result

    async def cancel_instance(self, instance_id: str, *, reason: str | None = None,
                              idempotency_key: str | None = None,
                              actor: Actor | None = None) -> OperationResult:
        """Cancel gracefully (core/cancel.py): CANCELLING, the children asked per their
        spawn's ``onCancel``, the ``cancelStage`` entered; CANCELLED once that stage
        finished and every child row settled, aborted past the timeout."""
        verb = CancelInstance(reason, idempotency_key)
        return await self._verb(instance_id, "cancelInstance", actor,
                                lambda s, c: plan_cancel(s, verb, c))

    async def set_stage(self, instance_id: str, stage: str, *, reason: str | None = None,
                        idempotency_key: str | None = None,
                        actor: Actor | None = None) -> OperationResult:
        verb = verbs.SetStage(stage, reason, idempotency_key)
        return await self._verb(instance_id, "setStage", actor,
                                lambda s, c: verbs.plan_set_stage(s, verb, c))

    async def update_cohort(self, parent_id: str, activity: str, *,
                            max_active: int | None = None, failure_budget: Any = None,
                            actor: Actor | None = None) -> Instance:
        """Change a cohort's window (core/window.py) or failure budget (core/budget.py);
        the parent as it is afterwards."""
        verb = verbs.UpdateCohort(activity, max_active, failure_budget)
        result = await self._verb(parent_id, "updateCohort", actor,
                                  lambda s, c: verbs.plan_update_cohort(s, verb, c))
        return result.instance

    async def redrive_cohort(self, parent_id: str, activity: str, *,
                             where: CohortFilter | None = None,
                             idempotency_key: str | None = None,
                             actor: Actor | None = None) -> BulkResult:
        """A new attempt for each matching failed, aborted or cancelled row of the
        activity's cohort (core/redrive.py), in batched commits (engine/bulk.py)."""
        await self.ensure_ready()
        return await self.bulk.redrive(parent_id, activity, where, idempotency_key,
                                       actor or Actor.system())

    async def fire_cohort(self, parent_id: str, activity: str, child_activity: str,
                          action: str, *, where: CohortFilter | None = None,
                          params: dict[str, Any] | None = None,
                          idempotency_key: str | None = None,
                          actor: Actor | None = None) -> BulkResult:
        """Fire ``child_activity.action`` on each matching live child of the activity's
        cohort, once per child under ``<key>:<rowKey>`` (core/bulk_verbs.py)."""
        await self.ensure_ready()
        return await self.bulk.fire(parent_id, activity, where, child_activity, action,
                                    params, idempotency_key, actor or Actor.system())

    async def abort_cohort(self, parent_id: str, activity: str, *,
                           where: CohortFilter | None = None, reason: str | None = None,
                           idempotency_key: str | None = None,
                           actor: Actor | None = None) -> BulkResult:
        """Abort each matching child of the activity's cohort; without ``where`` it also
        closes the cohort (core/bulk_verbs.py)."""
        await self.ensure_ready()
        return await self.bulk.end(ABORT_COHORT, parent_id, activity, where, reason,
                                   idempotency_key, actor or Actor.system())

    async def cancel_cohort(self, parent_id: str, activity: str, *,
                            where: CohortFilter | None = None, reason: str | None = None,
                            idempotency_key: str | None = None,
                            actor: Actor | None = None) -> BulkResult:
        """Gracefully cancel each matching child of the activity's cohort; without
        ``where`` it also closes the cohort (core/bulk_verbs.py)."""
        await self.ensure_ready()
        return await self.bulk.end(CANCEL_COHORT, parent_id, activity, where, reason,
                                   idempotency_key, actor or Actor.system())

    async def reset_activity(self, instance_id: str, activity: str, *, to: str = "active",
                             idempotency_key: str | None = None,
                             actor: Actor | None = None) -> OperationResult:
        verb = verbs.ResetActivity(activity, to, idempotency_key)
        return await self._verb(instance_id, "resetActivity", actor,
                                lambda s, c: verbs.plan_reset_activity(s, verb, c))

    async def _verb(self, instance_id: str, name: str, actor: Actor | None, planner: Planner,
                    *, cascade: bool = True) -> OperationResult:
        return await self.driver.verb(instance_id, name, actor, planner, cascade=cascade)

    async def _commit(self, instance_id: str, name: str, actor: Actor, planner: Planner
                      ) -> Mutation:
        """One transaction: load, plan, fenced write (retried by the lake on conflict)."""
        return await self.transact.commit(instance_id, planner, verb=name, actor=actor)

    # ------------------------------------------------------------ effects

    async def drain_effects(self, instance_id: str, *, actor: Actor | None = None,
                            missing_handler: str = "skip") -> drain.DrainReport:
        """Claim, run and report every runnable pending effect of one instance."""
        return await drain.drain_effects(self, instance_id, actor=actor or Actor.system(),
                                         now=self.clock, limits=self.limits,
                                         missing_handler=missing_handler)

    async def claim_effect(self, instance_id: str, effect_key: str, *,
                           actor: Actor | None = None) -> str:
        """Claim one pending effect with a lease (for workers that run effects themselves).

        Returns the claim token; a live claim held by someone else is refused, an
        expired one is taken over (recorded as ``effectClaimReleased``).
        """
        lease = self.limits.effect_lease_seconds
        mutation = await self.transact.commit(
            instance_id, lambda state, ctx: verbs.plan_claim_effect(state, effect_key, lease, ctx),
            verb="claimEffect", actor=actor or Actor.system(), attempts=3, always_write=True)
        token: str = mutation.result.claimToken
        return token

    async def sweep_stale_claims(self, instance_id: str, *, actor: Actor | None = None) -> int:
        """Release every expired effect claim of one instance; returns how many."""
        mutation = await self.transact.commit(instance_id, verbs.plan_sweep,
                                              verb="sweepStaleClaims",
                                              actor=actor or Actor.system(), attempts=5)
        released: int = mutation.result
        return released

    # ------------------------------------------------------------ subworkflows

    async def _after_commit(self, mutation: Mutation) -> None:
        await self.materialiser.after_commit(mutation)

    async def _batch(self, documents: list[dict[str, Any]]) -> None:
        await self._insert_missing(documents)

    async def _insert_missing(self, documents: list[dict[str, Any]]) -> None:
        await self.materialiser.insert_missing(documents)

    async def finish_materialising(self, parent_id: str, *, actor: Actor | None = None) -> int:
        """Create the children a large spawn registered but a crash left uncreated."""
        return await self.materialiser.finish(await self.transact.load(parent_id, None),
                                              actor or Actor.system())

    @property
    def bulk_now(self) -> set[str]:
        """Parents with a bulk cohort call running in this process (the heartbeat skips
        them)."""
        return self.bulk.now

    async def finish_bulk(self, parent_id: str, *, actor: Actor | None = None) -> int:
        """Finish the bulk cohort calls a crash interrupted between batches (engine/bulk.py)."""
        return await self.bulk.finish(parent_id, actor or Actor.system())

    async def repair(self, instance_id: str, *, actor: Actor | None = None) -> Instance:
        """Finish what a crash left owed on one instance: drain owed aborts, make owed
        cancel requests, propagate.

        The heartbeat calls this for terminal instances (an aborted parent whose
        drain was interrupted); in-flight ones are repaired by ``tick``.
        """
        actor = actor or Actor.system()
        instance = await self.transact.load(instance_id, None)
        instance = await self.driver.drain_condemned(instance, actor)
        instance = await self.driver.drain_cancels(instance, actor)
        await self.driver.after(instance)
        return instance

    async def propagate_to(self, parent_id: str) -> None:
        """Run a propagation round on ``parent_id`` (stamp owed rows, cascade, go up)."""
        await self.propagator.request(parent_id)

    async def settle_propagation(self) -> None:
        """Wait until no propagation round is running in this process (background mode)."""
        await self.propagator.idle()

    # ------------------------------------------------------------ reads

    async def get_instance(self, instance_id: str) -> Instance:
        """The instance as readers see it (registry rows and whole history included)."""
        return await self.reads.instance(instance_id)

    async def assemble(self, document: dict[str, Any],
                       session: AsyncClientSession | None = None) -> dict[str, Any]:
        """A stored instance document as readers see it: its registry rows and whole
        history put back from their own documents (memoised by ``_rev``)."""
        return await self.transact.rows.assemble(document, session)

    async def available_actions(self, instance_id: str, *, actor: Actor | None = None
                                ) -> list[Verdict]:
        """One verdict per action of the current stage, with the reason it is disabled."""
        return await self.available_actions_for(await self.get_instance(instance_id),
                                                actor=actor)  # fmt: skip

    async def available_actions_for(self, instance: Instance, *, actor: Actor | None = None
                                    ) -> list[Verdict]:
        """``available_actions`` of an instance the caller already loaded (no re-read)."""
        return await self.reads.verdicts(instance, actor or Actor.system())

    async def query(self, query: str, params: dict[str, Any] | None = None,
                    caller: str | None = None) -> Any:
        """Read-only GROQ over this dataset; parameters are bound, never spliced;
        ``caller`` names the API caller it runs for (its own lane and bounds)."""
        return await self.reads.query(query, params, caller)

    async def instances_for_document(self, gdr: str) -> list[Instance]:
        """In-flight instances whose reference fields point at ``gdr`` (a GDR or bare id)."""
        return await self.reads.instances_for_document(gdr)

    async def due_instances(self, *, limit: int = 100, exclude: list[str] | None = None
                            ) -> list[str]:
        """Ids of in-flight instances whose ``nextEvaluationAt`` has passed (for a heartbeat)."""
        return await self.reads.due_instances(limit=limit, exclude=exclude)

    async def react_to_document_change(self, gdr: str, *, actor: Actor | None = None
                                       ) -> list[OperationResult]:
        """Tick every in-flight instance that reads ``gdr`` (the change hub calls this)."""
        results = []
        for instance in await self.instances_for_document(gdr):
            try:
                results.append(await self.tick(instance.id_, actor=actor))
            except InstanceNotFound:
                continue
        return results
