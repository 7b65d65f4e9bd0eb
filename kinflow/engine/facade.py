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
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kinflow.core import operator_verbs, verbs
from kinflow.core.cancel_instance import CancelInstance, plan_cancel
from kinflow.core.cohort.bulk import ABORT as ABORT_COHORT
from kinflow.core.cohort.bulk import CANCEL as CANCEL_COHORT
from kinflow.core.cohort.selection import BulkResult, CohortFilter
from kinflow.core.context import Actor, Limits
from kinflow.core.errors import InstanceNotFound
from kinflow.core.gates import Verdict
from kinflow.core.mutation import Mutation
from kinflow.core.owned import check_instance_id
from kinflow.core.retention import PurgeCounts, PurgeFilter
from kinflow.core.state import Instance
from kinflow.engine import content_writes, drain, ids
from kinflow.engine.bulk import BulkRunner
from kinflow.engine.content_writes import PutReport
from kinflow.engine.driving import Driver, OperationResult
from kinflow.engine.faults import Faults
from kinflow.engine.indexes import ENGINE_INDEXES
from kinflow.engine.maintenance import Maintenance
from kinflow.engine.materialise import Materialiser
from kinflow.engine.owing_hint import fold_repair_flags
from kinflow.engine.parking import Parked, Parking, unpark
from kinflow.engine.reads import DeployOutcome, Reader
from kinflow.engine.registration import Registrar
from kinflow.engine.retention import Purger
from kinflow.engine.rowstore import RowStore
from kinflow.engine.stamps import Stamps
from kinflow.engine.transact import Clock, Planner, Transactor
from kinflow.errors import DocumentExists
from kinflow.observability import engine as observing
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
        self.materialiser = Materialiser(self.transact)
        self.registrar = Registrar(self.transact, self.materialiser)
        self.driver = Driver(self.transact, propagation=propagation)
        self.reads = Reader(self.transact)
        self.bulk = BulkRunner(self.transact, self.driver)
        self.maintenance = Maintenance(self.transact, self.driver, self.materialiser,
                                       self.bulk, self.reads, self.registrar)
        self._ready = False

    async def ensure_ready(self) -> None:
        """Declare the engine's indexes and create the dataset (idempotent)."""
        if self._ready:
            return
        await fold_repair_flags(self.lake, self.dataset)  # before the old indexes go
        await self.lake.declare_indexes(ENGINE_INDEXES)
        await self.lake.ensure_dataset(self.dataset)
        await self.transact.rows.prepare()
        await Stamps(self.lake, self.dataset).prepare()
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

        async def started() -> OperationResult:
            try:
                mutation = await start()
            except DocumentExists:  # a concurrent start with the same id won: resume it
                mutation = await start()
            return await self.driver.cascade(mutation, actor)

        return await observing.verb("startInstance", new_id, started())

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
        """Re-evaluate: drain owed aborts, stamp what children did, cascade, propagate; then
        un-park, whatever the outcome (a tick is "try again now").

        The parking is deleted after the attempt, not before: while it stands the
        heartbeat leaves the instance alone, so the two never race through the same
        cascade, conflicting at every hop.
        """
        await self.ensure_ready()
        actor = actor or Actor.system()
        try:
            state = await self.transact.load(instance_id, None)
            await self.driver.drain_condemned(state, actor)
            await self.driver.drain_cancels(state, actor)
            return await self._verb(instance_id, "tick", actor, verbs.plan_hop)
        finally:
            await unpark(self.lake, self.dataset, instance_id)

    async def abort_instance(self, instance_id: str, *, reason: str | None = None,
                             idempotency_key: str | None = None,
                             actor: Actor | None = None) -> OperationResult:
        verb = operator_verbs.AbortInstance(reason, idempotency_key)
        actor = actor or Actor.system()
        result = await self._verb(instance_id, "abortInstance", actor,
                                  lambda s, c: operator_verbs.plan_abort(s, verb, c), cascade=False)
        # a retried abort of a terminal instance still drains and propagates
        instance = await self.driver.drain_condemned(result.instance, actor)
        await self.driver.after(instance, result.instance)
        result.instance = instance
        return result

    async def cancel_instance(self, instance_id: str, *, reason: str | None = None,
                              idempotency_key: str | None = None,
                              actor: Actor | None = None) -> OperationResult:
        """Cancel gracefully (core/cancel_instance.py): CANCELLING, the children asked per their
        spawn's ``onCancel``, the ``cancelStage`` entered; CANCELLED once that stage
        finished and every child row settled, aborted past the timeout."""
        verb = CancelInstance(reason, idempotency_key)
        return await self._verb(instance_id, "cancelInstance", actor,
                                lambda s, c: plan_cancel(s, verb, c))

    async def set_stage(self, instance_id: str, stage: str, *, reason: str | None = None,
                        idempotency_key: str | None = None,
                        actor: Actor | None = None) -> OperationResult:
        verb = operator_verbs.SetStage(stage, reason, idempotency_key)
        return await self._verb(instance_id, "setStage", actor,
                                lambda s, c: operator_verbs.plan_set_stage(s, verb, c))

    async def update_cohort(self, parent_id: str, activity: str, *,
                            max_active: int | None = None, failure_budget: Any = None,
                            max_active_per_key: int | None = None, start_rate: Any = None,
                            actor: Actor | None = None) -> Instance:
        """Change a cohort's window, failure budget, per-key window or start rate
        (core/cohort/window.py, budget.py, admission.py); the parent as it is afterwards."""
        verb = operator_verbs.UpdateCohort(activity, max_active, failure_budget,
                                           max_active_per_key, start_rate)
        result = await self._verb(parent_id, "updateCohort", actor,
                                  lambda s, c: operator_verbs.plan_update_cohort(s, verb, c))
        return result.instance

    async def pause_cohort(self, parent_id: str, activity: str, *, reason: str | None = None,
                           idempotency_key: str | None = None,
                           actor: Actor | None = None) -> Instance:
        """Hold the cohort's queued rows and retries; live children run on
        (core/cohort/admission.py). The parent as it is afterwards."""
        verb = operator_verbs.PauseCohort(activity, reason, idempotency_key)
        result = await self._verb(parent_id, "pauseCohort", actor,
                                  lambda s, c: operator_verbs.plan_pause_cohort(s, verb, c))
        return result.instance

    async def resume_cohort(self, parent_id: str, activity: str, *,
                            idempotency_key: str | None = None,
                            actor: Actor | None = None) -> Instance:
        """Let a paused cohort start rows again, in the same commit."""
        verb = operator_verbs.ResumeCohort(activity, idempotency_key)
        result = await self._verb(parent_id, "resumeCohort", actor,
                                  lambda s, c: operator_verbs.plan_resume_cohort(s, verb, c))
        return result.instance

    async def redrive_cohort(self, parent_id: str, activity: str, *,
                             where: CohortFilter | None = None,
                             idempotency_key: str | None = None,
                             actor: Actor | None = None) -> BulkResult:
        """A new attempt for each matching failed, aborted or cancelled row of the
        activity's cohort (core/cohort/redrive.py), in batched commits (engine/bulk.py)."""
        await self.ensure_ready()
        return await self.bulk.redrive(parent_id, activity, where, idempotency_key,
                                       actor or Actor.system())

    async def fire_cohort(self, parent_id: str, activity: str, child_activity: str,
                          action: str, *, where: CohortFilter | None = None,
                          params: dict[str, Any] | None = None,
                          idempotency_key: str | None = None,
                          actor: Actor | None = None) -> BulkResult:
        """Fire ``child_activity.action`` on each matching live child of the activity's
        cohort, once per child under ``<key>:<rowKey>`` (core/cohort/bulk.py)."""
        await self.ensure_ready()
        return await self.bulk.fire(parent_id, activity, where, child_activity, action,
                                    params, idempotency_key, actor or Actor.system())

    async def abort_cohort(self, parent_id: str, activity: str, *,
                           where: CohortFilter | None = None, reason: str | None = None,
                           idempotency_key: str | None = None,
                           actor: Actor | None = None) -> BulkResult:
        """Abort each matching child of the activity's cohort; without ``where`` it also
        closes the cohort (core/cohort/bulk.py)."""
        await self.ensure_ready()
        return await self.bulk.end(ABORT_COHORT, parent_id, activity, where, reason,
                                   idempotency_key, actor or Actor.system())

    async def cancel_cohort(self, parent_id: str, activity: str, *,
                            where: CohortFilter | None = None, reason: str | None = None,
                            idempotency_key: str | None = None,
                            actor: Actor | None = None) -> BulkResult:
        """Gracefully cancel each matching child of the activity's cohort; without
        ``where`` it also closes the cohort (core/cohort/bulk.py)."""
        await self.ensure_ready()
        return await self.bulk.end(CANCEL_COHORT, parent_id, activity, where, reason,
                                   idempotency_key, actor or Actor.system())

    async def reset_activity(self, instance_id: str, activity: str, *, to: str = "active",
                             idempotency_key: str | None = None,
                             actor: Actor | None = None) -> OperationResult:
        verb = operator_verbs.ResetActivity(activity, to, idempotency_key)
        return await self._verb(instance_id, "resetActivity", actor,
                                lambda s, c: operator_verbs.plan_reset_activity(s, verb, c))

    async def _verb(self, instance_id: str, name: str, actor: Actor | None, planner: Planner,
                    *, cascade: bool = True) -> OperationResult:
        await self.ensure_ready()
        return await observing.verb(name, instance_id, self.driver.verb(
            instance_id, name, actor, planner, cascade=cascade))

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

    # ------------------------------------------------------------ subworkflows

    async def _after_commit(self, mutation: Mutation) -> None:
        if mutation.instance.rowCount and self.driver.grouper is not None:
            self.driver.grouper.remember_solo(mutation.instance.id_)  # its verbs skip groups
        await self.materialiser.after_commit(mutation)
        await self.registrar.after_commit(mutation)


    # ------------------------------------------------------------ reads

    async def get_instance(self, instance_id: str) -> Instance:
        """The instance as readers see it (registry rows and whole history included)."""
        return await self.reads.instance(instance_id)

    async def assemble(self, document: dict[str, Any],
                       session: AsyncClientSession | None = None) -> dict[str, Any]:
        """A stored instance document as readers see it: its registry rows and whole
        history put back from their own documents (memoised by ``_rev``)."""
        return await self.transact.rows.assemble(document, session)

    async def document(self, instance_id: str) -> dict[str, Any] | None:
        """The stored instance document as it is (registry rows not put back), or ``None``."""
        return await self.lake.get(instance_id, dataset=self.dataset)

    @property
    def rows(self) -> RowStore:
        """The registry chunks beside this dataset (cohort pages read them by chunk)."""
        return self.transact.rows

    async def parked(self, ids: list[str] | None = None, *, limit: int = 100) -> list[Parked]:
        """Instances the heartbeat parked (``ids``: only those), most recent first."""
        return await Parking(self.lake, self.dataset).listed(ids, limit=limit)

    async def purge(self, where: PurgeFilter, *, dry_run: bool = True) -> PurgeCounts:
        """Purge (or count, on a dry run) the finished families ``where`` selects
        (docs/retention.md)."""
        return await Purger(self.lake, self.dataset, faults=self.faults).purge(
            where, self.clock(), dry_run=dry_run)

    async def hold_family(self, root_id: str, reason: str, by: str) -> dict[str, Any]:
        """Keep a family whatever its age (retention and purges pass it over); the root."""
        return await Purger(self.lake, self.dataset, faults=self.faults).hold(
            root_id, reason, by, self.clock())

    async def release_family(self, root_id: str) -> dict[str, Any]:
        """Lift a family's hold: retention applies to it again; the root."""
        return await Purger(self.lake, self.dataset, faults=self.faults).release(root_id)

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

    async def put_documents(self, documents: list[Any], *, dataset: str | None = None,
                            actor: Actor | None = None) -> PutReport:
        """Create or replace content documents in batches, each checked as ``putDocument``
        checks one; a refusal names the document's index (engine/content_writes.py)."""
        return await content_writes.put_documents(self.lake, dataset or self.dataset, documents)
