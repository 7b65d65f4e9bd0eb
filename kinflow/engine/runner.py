"""The runner: the engine's only I/O, wrapped around the pure planners.

This module owns how a verb becomes commits on the lake, and nothing about
workflow rules. Every commit has the same shape:

1. inside one MongoDB transaction, load the instance (with its ``_rev``);
2. plan purely with one clock reading: ``planner(state, ctx) -> Mutation``;
   when the planner asks for a lake read it was not given (``NeedsIO``),
   read it inside the same transaction and plan again from scratch;
3. write the mutation: insert, or replace fenced on the loaded ``_rev``;
4. a conflict anywhere (write conflict, fence miss) re-runs the whole
   callback with a fresh load; after the lake's bounded attempts the caller
   gets ``concurrent-modification`` naming the verb. A refusal raised by the
   planner aborts the transaction: nothing is written.

After a verb's own commit the runner drives the cascade, one commit per hop,
until a hop moves nothing (``cascade-limit`` after ``limits.cascade_moves``
moves). Effects are run by handlers registered by name; ``drain_effects``
claims each pending effect with a lease, runs its handler outside any
transaction and reports through ``complete_effect``.

Subworkflows (docs/subworkflows.md): a spawning commit also creates the
child documents (up to ``limits.spawn_txn`` in the same transaction, the rest
in idempotent batches right after); children whose first hop the plan could
not run are cascaded before the parent reacts; every hop first drains owed
aborts and stamps what it observes about children; after a verb, a child that
changed asks its parent for a propagation round (``propagation.Propagator``).
Fault points (``faults.Faults``) sit at each step of the crash windows.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kinflow.core import deploy as deploying
from kinflow.core import patch as patching
from kinflow.core import verbs
from kinflow.core.cohorts import OBSERVATION_FIELDS, Observation, condemned
from kinflow.core.commit import plan_materialise
from kinflow.core.context import (
    Actor,
    Limits,
    NeedsDefinition,
    NeedsDocuments,
    NeedsIO,
    NeedsLakeQuery,
    PlanContext,
    parse_iso,
)
from kinflow.core.errors import (
    CascadeLimit,
    ContractViolation,
    DefinitionNotFound,
    EffectNotFound,
    InstanceNotFound,
)
from kinflow.core.gates import Verdict
from kinflow.core.gates import available_actions as action_verdicts
from kinflow.core.inputs import bounded_outcome
from kinflow.core.mutation import Mutation
from kinflow.core.state import INSTANCE_TYPE, Instance, PendingEffect, parse_instance
from kinflow.define.validate import Checked
from kinflow.engine import ids, sizes
from kinflow.engine.faults import Faults
from kinflow.engine.propagation import Propagator
from kinflow.errors import DocumentExists, KinflowError, RevisionConflict
from kinflow.gdr import to_gdr
from kinflow.groq.store import query_collection
from kinflow.storage.documents import iso as iso_moment
from kinflow.storage.documents import new_rev, stamp_created
from kinflow.storage.lake import IndexSpec, Lake

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession

Clock = Callable[[], datetime]
Planner = Callable[[Instance, PlanContext], Mutation]
ObservingPlanner = Callable[[Instance, PlanContext, list[Observation]], Mutation]
Gather = Callable[[Instance, "AsyncClientSession"], Awaitable[list[Observation]]]
_INSTANCES = {"_type": INSTANCE_TYPE}
_IO_ROUNDS = 32
# registry rows + history rows from which parsing, planning and diffing an instance
# leave the event loop: on a cohort parent they take 0.1-1 s (docs/performance.md),
# which would stall every request the process serves meanwhile
_HEAVY_PARTS = 512
_KEPT_HEAVY = 8  # heavy instances (cohort parents) kept parsed between commits, by _rev
_CHEAP_MISSING_CHECK = 256  # live rows up to which every hop looks for missing children

ENGINE_INDEXES: tuple[IndexSpec, ...] = (
    IndexSpec("definition_name_version", (("_type", 1), ("name", 1), ("version", -1)),
              partial={"_type": deploying.DEFINITION_TYPE}),
    IndexSpec("instance_watch", (("watch", 1),), partial=_INSTANCES),
    IndexSpec("instance_due", (("nextEvaluationAt", 1),), partial=_INSTANCES),
    IndexSpec("instance_parent", (("ancestors.id", 1),), partial=_INSTANCES),
    IndexSpec("instance_definition", (("definition", 1), ("completedAt", 1)),
              partial=_INSTANCES),
    # subworkflows: children by parent, and the repair hints the heartbeat follows
    IndexSpec("instance_children", (("parentInstance", 1), ("completedAt", 1)),
              partial=_INSTANCES),
    IndexSpec("instance_propagate", (("propagateTo", 1),), partial=_INSTANCES),
    IndexSpec("instance_owes_aborts", (("owesAborts", 1),), partial=_INSTANCES),
    IndexSpec("instance_materialising", (("materialising", 1),), partial=_INSTANCES),
    IndexSpec("instance_effects_due", (("effectsDueAt", 1),), partial=_INSTANCES),
)


def system_clock() -> datetime:
    return datetime.now(UTC)


def _heavy(instance: Instance) -> bool:
    return len(instance.subworkflows) + len(instance.history) > _HEAVY_PARTS


def _heavy_document(document: dict[str, Any]) -> bool:
    rows, history = document.get("subworkflows"), document.get("history")
    return (len(rows) if isinstance(rows, list) else 0) + (
        len(history) if isinstance(history, list) else 0) > _HEAVY_PARTS


@dataclass(slots=True)
class OperationResult:
    """What every mutating verb returns (GRAPHQL.md ``OperationResult``)."""

    instance: Instance
    changed: bool
    cascaded: int
    next_evaluation_at: str | None = None


@dataclass(slots=True)
class DeployedDefinition:
    name: str
    version: int
    status: str


@dataclass(slots=True)
class DeployOutcome:
    definitions: list[DeployedDefinition]
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class EffectCall:
    """What an effect handler receives."""

    instance_id: str
    effect_key: str
    name: str
    params: dict[str, Any]
    claim_token: str


EffectHandler = Callable[[EffectCall], Awaitable[Mapping[str, Any] | None] | Mapping[str, Any]
                         | None]


@dataclass(slots=True)
class DrainReport:
    drained: int = 0
    failed: int = 0
    skipped: int = 0
    lost: int = 0


@dataclass(slots=True)
class _Reads:
    """Lake reads gathered for one commit; kept across retries of that commit."""

    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    absent: set[str] = field(default_factory=set)
    queries: dict[str, Any] = field(default_factory=dict)
    definitions: dict[tuple[str, int | None], dict[str, Any] | None] = field(
        default_factory=dict)


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
        self.new_key = new_key
        self.handlers: dict[str, EffectHandler] = {}
        self.faults = faults or Faults()
        # "auto": a verb on a child of a small cohort returns after its parent reacted
        # (the reference's contract); in a large cohort it returns after its own commits
        # and the parent reacts in paced, coalesced rounds. "inline"/"background" force one
        self.propagator = Propagator(self._round, mode=propagation)
        self._ready = False
        # the last committed state of a few heavy instances: a round on a cohort
        # parent then reads only its _rev instead of reading and parsing megabytes
        self._kept: OrderedDict[str, Instance] = OrderedDict()
        # parents whose children this process is creating right now: the heartbeat
        # leaves them alone (a large spawn outlives its grace period)
        self.materialising_now: set[str] = set()

    async def ensure_ready(self) -> None:
        """Declare the engine's indexes and create the dataset (idempotent)."""
        if self._ready:
            return
        await self.lake.declare_indexes(ENGINE_INDEXES)
        await self.lake.ensure_dataset(self.dataset)
        self._ready = True

    def register_handler(self, name: str, handler: EffectHandler) -> None:
        """Run ``handler`` for effects named ``name`` (one handler per name)."""
        self.handlers[name] = handler

    # ------------------------------------------------------------ deploy

    async def deploy(self, definitions: list[Any], *, actor: Actor | None = None
                     ) -> DeployOutcome:
        """Validate and store a batch; all or nothing."""
        await self.ensure_ready()
        # validation is CPU-bound (a large definition takes seconds): off the event loop
        checked = await asyncio.to_thread(deploying.validate_batch, definitions,
                                          max_bytes=self.limits.definition_bytes)

        async def callback(session: AsyncClientSession) -> deploying.DeployPlan:
            deployed = await self._deployed_heads(checked, session)
            plan = deploying.plan_deploy(checked, deployed, self._iso(self.clock()))
            for document in plan.creates:
                await self.lake.create(document, dataset=self.dataset, session=session)
            return plan

        try:
            plan = await self.lake.transaction(callback, verb="deployDefinitions")
        except DocumentExists:  # a concurrent deploy created that version first: re-plan
            plan = await self.lake.transaction(callback, verb="deployDefinitions")
        return DeployOutcome(
            [DeployedDefinition(r.name, r.version, r.status) for r in plan.results],
            plan.warnings,
        )

    async def _deployed_heads(
        self, checked: list[Checked], session: AsyncClientSession
    ) -> dict[tuple[str, int | None], dict[str, Any]]:
        heads: dict[tuple[str, int | None], dict[str, Any]] = {}
        for name in deploying.referenced_names(checked):
            latest = await self._latest_definition(name, session)
            if latest is not None:
                heads[(name, None)] = latest
        for name, version in deploying.pinned_refs(checked):
            found = await self.lake.get(deploying.definition_id(name, version),
                                        dataset=self.dataset, session=session)
            if found is not None:
                heads[(name, version)] = found
        return heads

    async def _latest_definition(
        self, name: str, session: AsyncClientSession | None = None
    ) -> dict[str, Any] | None:
        found = await self.lake.find(
            {"_type": deploying.DEFINITION_TYPE, "name": name}, dataset=self.dataset,
            session=session, sort=[("version", -1)], limit=1,
        )
        return found[0] if found else None

    async def get_definition(self, name: str, version: int | None = None) -> dict[str, Any]:
        if version is None:
            found = await self._latest_definition(name)
        else:
            found = await self.lake.get(deploying.definition_id(name, version),
                                        dataset=self.dataset)
        if found is None:
            raise DefinitionNotFound(
                f"no deployed definition {name!r}" + (f" v{version}" if version else ""),
                definition=name, version=version,
            )
        return found

    # ------------------------------------------------------------ start

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
        await self.ensure_ready()
        actor = actor or Actor.system()
        document = await self.get_definition(definition, version)
        # the id is chosen once, so re-plans (lake reads) and retries agree on it
        verb = verbs.StartInstance(document, fields, instance_id or ids.new_instance_id(),
                                   context, ancestors)

        async def callback(session: AsyncClientSession) -> Mutation:
            assert verb.instance_id is not None
            existing = await self.lake.get(verb.instance_id, dataset=self.dataset,
                                           session=session)
            if existing is not None:
                state = parse_instance(existing)
                mutation = await self._plan(lambda ctx: verbs.plan_resume(state, verb, ctx),
                                            actor, session)
                await self._write(mutation, state.rev_, session)
                return mutation
            mutation = await self._plan(lambda ctx: verbs.plan_start(verb, ctx), actor, session)
            await self._write(mutation, None, session)
            return mutation

        try:
            mutation = await self.lake.transaction(callback, verb="startInstance")
        except DocumentExists:  # a concurrent start with the same id won: resume it
            mutation = await self.lake.transaction(callback, verb="startInstance")
        await self._after_commit(mutation)
        return await self._cascade(mutation, actor)

    # ------------------------------------------------------------ verbs

    async def fire_action(
        self,
        instance_id: str,
        activity: str,
        action: str,
        *,
        params: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        actor: Actor | None = None,
    ) -> OperationResult:
        verb = verbs.FireAction(activity, action, params, idempotency_key)
        return await self._verb(instance_id, "fireAction", actor,
                                lambda s, c: verbs.plan_fire_action(s, verb, c))

    async def edit_field(
        self,
        instance_id: str,
        field: str,
        value: Any = None,
        *,
        mode: str = "set",
        scope: str | None = None,
        activity: str | None = None,
        idempotency_key: str | None = None,
        actor: Actor | None = None,
    ) -> OperationResult:
        verb = verbs.EditField(field, value, mode.lower(), scope, activity, idempotency_key)
        return await self._verb(instance_id, "editField", actor,
                                lambda s, c: verbs.plan_edit_field(s, verb, c))

    async def complete_effect(
        self,
        instance_id: str,
        effect_key: str,
        status: str,
        *,
        outputs: dict[str, Any] | None = None,
        error: str | None = None,
        detail: str | None = None,
        duration_ms: int | None = None,
        idempotency_key: str | None = None,
        actor: Actor | None = None,
    ) -> OperationResult:
        verb = verbs.CompleteEffect(effect_key, status.lower(), outputs, error, detail,
                                    duration_ms, idempotency_key)
        return await self._verb(instance_id, "completeEffect", actor,
                                lambda s, c: verbs.plan_complete_effect(s, verb, c))

    async def tick(self, instance_id: str, *, actor: Actor | None = None) -> OperationResult:
        """Re-evaluate: drain owed aborts, stamp what children did, cascade, propagate."""
        actor = actor or Actor.system()
        state = await self.get_instance(instance_id)
        state = await self._drain_condemned(state, actor)
        return await self._verb(instance_id, "tick", actor, verbs.plan_hop)

    async def abort_instance(
        self,
        instance_id: str,
        *,
        reason: str | None = None,
        idempotency_key: str | None = None,
        actor: Actor | None = None,
    ) -> OperationResult:
        verb = verbs.AbortInstance(reason, idempotency_key)
        actor = actor or Actor.system()
        result = await self._verb(instance_id, "abortInstance", actor,
                                  lambda s, c: verbs.plan_abort(s, verb, c), cascade=False)
        # a retried abort of a terminal instance still drains and propagates (§5.11)
        instance = await self._drain_condemned(result.instance, actor)
        await self._after(instance)
        result.instance = instance
        return result

    async def set_stage(
        self,
        instance_id: str,
        stage: str,
        *,
        reason: str | None = None,
        idempotency_key: str | None = None,
        actor: Actor | None = None,
    ) -> OperationResult:
        verb = verbs.SetStage(stage, reason, idempotency_key)
        return await self._verb(instance_id, "setStage", actor,
                                lambda s, c: verbs.plan_set_stage(s, verb, c))

    async def reset_activity(
        self,
        instance_id: str,
        activity: str,
        *,
        to: str = "active",
        idempotency_key: str | None = None,
        actor: Actor | None = None,
    ) -> OperationResult:
        verb = verbs.ResetActivity(activity, to, idempotency_key)
        return await self._verb(instance_id, "resetActivity", actor,
                                lambda s, c: verbs.plan_reset_activity(s, verb, c))

    # ------------------------------------------------------------ effects

    async def drain_effects(
        self, instance_id: str, *, actor: Actor | None = None, missing_handler: str = "skip"
    ) -> DrainReport:
        """Claim, run and report every runnable pending effect of one instance."""
        actor = actor or Actor.system()
        report = DrainReport()
        attempted: set[str] = set()
        while True:
            instance = await self.get_instance(instance_id)
            now = self.clock()
            pending = self._next_claimable(instance, now, attempted)
            if pending is None:
                return report
            attempted.add(pending.key_)
            handler = self.handlers.get(pending.name)
            if handler is None:
                if missing_handler == "fail":
                    from kinflow.core.errors import MissingEffectHandler

                    raise MissingEffectHandler(f"no handler for effect {pending.name!r}",
                                               effect=pending.name, phase="drain")
                report.skipped += 1
                continue
            try:
                claimed = await self.claim_effect(instance_id, pending.key_, actor=actor)
            except KinflowError:  # lost the claim race or the effect settled meanwhile
                continue
            started = time.monotonic()
            try:
                outputs = handler(EffectCall(instance_id, pending.key_, pending.name,
                                             dict(pending.params), claimed))
                if inspect.isawaitable(outputs):
                    outputs = await outputs
                status, error = "done", None
            except Exception as exc:  # the handler's failure is the effect's outcome
                outputs, status, error = None, "failed", f"{type(exc).__name__}: {exc}"
            outputs, status, error = bounded_outcome(outputs, status, error, self.limits)
            duration = int((time.monotonic() - started) * 1000)
            try:
                await self.complete_effect(
                    instance_id, pending.key_, status,
                    outputs=dict(outputs) if outputs else None, error=error,
                    duration_ms=duration, actor=actor,
                )
            except EffectNotFound:
                report.lost += 1
                continue
            if status == "done":
                report.drained += 1
            else:
                report.failed += 1

    def _next_claimable(self, instance: Instance, now: datetime, attempted: set[str]
                        ) -> PendingEffect | None:
        for pending in instance.pendingEffects:
            if pending.key_ in attempted:
                continue
            claim = pending.claim
            if claim is None or claim.leaseExpiresAt is None or parse_iso(
                    claim.leaseExpiresAt) <= now:
                return pending
        return None

    async def claim_effect(
        self, instance_id: str, effect_key: str, *, actor: Actor | None = None
    ) -> str:
        """Claim one pending effect with a lease (for workers that run effects themselves).

        Returns the claim token; a live claim held by someone else is refused, an
        expired one is taken over (recorded as ``effectClaimReleased``).
        """
        lease = self.limits.effect_lease_seconds
        actor = actor or Actor.system()

        async def callback(session: AsyncClientSession) -> Mutation:
            state = await self._load(instance_id, session)
            mutation = await self._plan(
                lambda ctx: verbs.plan_claim_effect(state, effect_key, lease, ctx), actor, session)
            await self._write(mutation, state.rev_, session)
            return mutation

        mutation = await self.lake.transaction(callback, verb="claimEffect", attempts=3)
        token: str = mutation.result.claimToken
        return token

    async def sweep_stale_claims(self, instance_id: str, *, actor: Actor | None = None) -> int:
        """Release every expired effect claim of one instance; returns how many."""
        actor = actor or Actor.system()

        async def callback(session: AsyncClientSession) -> Mutation:
            state = await self._load(instance_id, session)
            mutation = await self._plan(lambda ctx: verbs.plan_sweep(state, ctx), actor, session)
            if mutation.dirty:
                await self._write(mutation, state.rev_, session)
            return mutation

        mutation = await self.lake.transaction(callback, verb="sweepStaleClaims", attempts=5)
        released: int = mutation.result
        return released

    # ------------------------------------------------------------ reads

    async def get_instance(self, instance_id: str) -> Instance:
        document = await self.lake.get(instance_id, dataset=self.dataset)
        if document is None or document.get("_type") != INSTANCE_TYPE:
            raise InstanceNotFound(f"no instance {instance_id!r}", instanceId=instance_id)
        return parse_instance(document)

    async def available_actions(
        self, instance_id: str, *, actor: Actor | None = None
    ) -> list[Verdict]:
        """One verdict per action of the current stage, with the reason it is disabled."""
        return await self.available_actions_for(await self.get_instance(instance_id),
                                                actor=actor)  # fmt: skip

    async def available_actions_for(
        self, instance: Instance, *, actor: Actor | None = None
    ) -> list[Verdict]:
        """``available_actions`` of an instance the caller already loaded (no re-read)."""
        actor = actor or Actor.system()
        definition = instance.definition_model()
        reads = _Reads()
        for _ in range(_IO_ROUNDS):
            ctx = self._context(actor, self.clock(), reads)
            try:
                return action_verdicts(instance, definition, ctx, actor)
            except NeedsIO as need:
                await self._satisfy(need, reads, None)
        raise ContractViolation("available_actions needed too many lake reads")

    async def query(self, query: str, params: dict[str, Any] | None = None) -> Any:
        """Read-only GROQ over this dataset; parameters are bound, never spliced."""
        return await self._run_query(query, params or {})

    async def instances_for_document(self, gdr: str) -> list[Instance]:
        """In-flight instances whose reference fields point at ``gdr`` (a GDR or bare id)."""
        uri = str(to_gdr(gdr, self.dataset))
        # one indexed predicate besides _type: the embedded planner serves only
        # queries its index covers whole (else it reads every instance)
        found = await self.lake.find({"_type": INSTANCE_TYPE, "watch": uri},
                                     dataset=self.dataset)
        return [parse_instance(doc) for doc in found if doc.get("completedAt") is None]

    async def due_instances(self, *, limit: int = 100, exclude: list[str] | None = None
                            ) -> list[str]:
        """Ids of in-flight instances whose ``nextEvaluationAt`` has passed (for a heartbeat).

        ``exclude`` pages past ids the caller could not take (their lease is held).
        """
        now = self._iso(self.clock())
        # served by instance_due alone (a bounded range skips the instances without
        # a due time); completed and excluded ones are dropped here, since any other
        # predicate would make the embedded planner read every instance
        skip = set(exclude or ())
        found = await self.lake.find(
            {"_type": INSTANCE_TYPE, "nextEvaluationAt": {"$gt": "", "$lte": now}},
            dataset=self.dataset, sort=[("nextEvaluationAt", 1)], limit=limit + len(skip),
            projection={"_id": 1, "completedAt": 1},
        )
        due = [str(doc["_id"]) for doc in found
               if doc.get("completedAt") is None and str(doc["_id"]) not in skip]
        return due[:limit]

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

    # ------------------------------------------------------------ machinery

    async def _verb(
        self,
        instance_id: str,
        name: str,
        actor: Actor | None,
        planner: Planner,
        *,
        cascade: bool = True,
    ) -> OperationResult:
        actor = actor or Actor.system()
        if planner is verbs.plan_hop:
            mutation = await self._hop(instance_id, name, actor, check_missing=name == "tick")
        else:
            mutation = await self._commit(instance_id, name, actor, planner)
        if not cascade:
            return OperationResult(mutation.instance, mutation.changed, 0,
                                   mutation.instance.nextEvaluationAt)
        return await self._cascade(mutation, actor)

    async def _commit(self, instance_id: str, name: str, actor: Actor, planner: Planner
                      ) -> Mutation:
        """One transaction: load, plan, fenced write (retried by the lake on conflict)."""

        async def callback(session: AsyncClientSession) -> Mutation:
            state = await self._load(instance_id, session)
            mutation = await self._plan(lambda ctx: planner(state, ctx), actor, session,
                                        offload=_heavy(state))
            if mutation.dirty:
                await self._write(mutation, state.rev_, session)
            return mutation

        mutation = await self.lake.transaction(callback, verb=name)
        await self._after_commit(mutation)
        return mutation

    async def _observing(self, instance_id: str, name: str, actor: Actor,
                         planner: ObservingPlanner, gather: Gather) -> Mutation:
        """A commit whose plan also gets what ``gather`` read about children, in-transaction."""

        async def callback(session: AsyncClientSession) -> Mutation:
            state = await self._load(instance_id, session)
            seen = await gather(state, session)
            mutation = await self._plan(lambda ctx: planner(state, ctx, seen), actor, session,
                                        offload=_heavy(state))
            if mutation.dirty:
                await self._write(mutation, state.rev_, session)
            return mutation

        mutation = await self.lake.transaction(callback, verb=name)
        await self._after_commit(mutation)
        return mutation

    async def _hop(self, instance_id: str, name: str, actor: Actor, *,
                   check_missing: bool = False) -> Mutation:
        """One cascade hop that first stamps what the instance's children did."""

        async def gather(state: Instance, session: AsyncClientSession) -> list[Observation]:
            return await self._gather_children(state, session, check_missing)

        return await self._observing(instance_id, name, actor, verbs.plan_hop, gather)

    async def _gather_children(self, state: Instance, session: AsyncClientSession,
                               check_missing: bool) -> list[Observation]:
        """Children owing this instance a stamp, and (on a tick) live rows whose child is gone.

        Reads only the children that changed (their ``propagateTo`` names this
        instance). Every hop of a parent with a small live cohort, and every tick,
        also counts the live children by index and reads their ids only when the
        count says a document is missing; for large cohorts only ticks pay for
        that count, which costs in proportion to the cohort.
        """
        owed = await self.lake.find({**_INSTANCES, "propagateTo": state.id_},
                                    dataset=self.dataset,
                                    session=session, projection=OBSERVATION_FIELDS)
        seen = [Observation.of(doc) for doc in owed]
        live = [r for r in state.subworkflows
                if r.resolved is None and not (state.materialising and r.seed is not None)]
        if not live or (not check_missing and len(live) > _CHEAP_MISSING_CHECK):
            return seen
        finishing = {o.child_id for o in seen if o.status in ("done", "aborted")}
        expected = sum(1 for r in live if r.child_id not in finishing)
        present = await self.lake.count({**_INSTANCES, "parentInstance": state.id_,
                                         "completedAt": None},
                                        dataset=self.dataset, session=session)
        if present >= expected:
            return seen
        ids = [r.child_id for r in live]
        exists: set[str] = set()
        for start in range(0, len(ids), 500):
            found = await self.lake.find({"_id": {"$in": ids[start:start + 500]}},
                                         dataset=self.dataset, session=session,
                                         projection={"_id": 1})
            exists |= {str(doc["_id"]) for doc in found}
        seen.extend(Observation.missing(r.child_id) for r in live if r.child_id not in exists)
        return seen

    async def _after_commit(self, mutation: Mutation) -> None:
        """Post-commit work of a spawn: create the children that did not fit the transaction."""
        if not mutation.creates:
            return
        self.faults.check("after-spawn-commit")
        rest = mutation.creates[self.limits.spawn_txn:]
        if not rest:
            return
        await self._materialise(mutation.instance.id_, rest)

    async def _materialise(self, parent_id: str, documents: list[dict[str, Any]]) -> None:
        """Create children in idempotent batches (an existing id is already there)."""
        self.materialising_now.add(parent_id)
        try:
            size = max(1, self.limits.spawn_txn)
            for start in range(0, len(documents), size):
                if start:
                    self.faults.check("mid-materialise")
                await self._insert_missing(documents[start:start + size])
            try:
                await self.lake.update(parent_id, {"$unset": {"materialising": "",
                                                              "subworkflows.$[].seed": ""}},
                                       dataset=self.dataset)
            except RevisionConflict:  # the parent vanished; nothing to mark
                pass
        finally:
            self.materialising_now.discard(parent_id)

    async def _insert_missing(self, documents: list[dict[str, Any]]) -> None:
        from pymongo.errors import BulkWriteError

        moment = self.clock()
        stamped = [stamp_created(dict(doc), moment) for doc in documents]
        if not stamped:
            return
        try:
            await self.lake.collection(self.dataset).insert_many(stamped, ordered=False)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if not all(e.get("code") == 11000 for e in errors):
                raise

    async def finish_materialising(self, parent_id: str, *, actor: Actor | None = None) -> int:
        """Create the children a large spawn registered but a crash left uncreated."""
        actor = actor or Actor.system()
        parent = await self.get_instance(parent_id)
        seeded = [r for r in parent.subworkflows if r.seed is not None]
        if not parent.materialising or not seeded:
            return 0
        exists: set[str] = set()
        for start in range(0, len(seeded), 500):
            ids = [r.child_id for r in seeded[start:start + 500]]
            found = await self.lake.find({"_id": {"$in": ids}}, dataset=self.dataset,
                                         projection={"_id": 1})
            exists |= {str(doc["_id"]) for doc in found}
        owed = [r for r in seeded if r.child_id not in exists]

        def plan(ctx: PlanContext) -> Mutation:
            return Mutation(instance=parent, creates=plan_materialise(parent, owed, ctx))

        mutation = await self._plan(plan, actor, None)
        await self._materialise(parent_id, mutation.creates)
        return len(mutation.creates)

    async def _cascade(self, first: Mutation, actor: Actor, *, propagate: bool = True
                       ) -> OperationResult:
        """Drive hops after a verb's commit until one moves nothing, then propagate."""
        moves = first.moves
        changed = first.changed
        last = first
        instance_id = first.instance.id_
        owed = await self._settle(first, actor)
        instance = first.instance
        while (last.moves or owed) and not last.instance.terminal:
            if moves >= self.limits.cascade_moves:
                raise CascadeLimit(
                    f"instance {instance_id!r} moved {moves} times in one cascade",
                    instanceId=instance_id, limit=self.limits.cascade_moves,
                    stage=last.instance.currentStage,
                )
            await self._drain_condemned(last.instance, actor)
            last = await self._hop(instance_id, "cascade", actor)
            moves += last.moves
            changed = changed or last.changed
            owed = await self._settle(last, actor)
        instance = last.instance
        if instance.owesAborts:  # a terminal move condemned onExit cohorts; drain them too
            instance = await self._drain_condemned(instance, actor)
        if propagate:
            await self._after(instance)
        return OperationResult(instance, changed, moves, instance.nextEvaluationAt)

    async def _settle(self, mutation: Mutation, actor: Actor) -> bool:
        """Cascade the children a spawn could not settle in its plan (they spawn too)."""
        if not mutation.settle:
            return False
        for child_id in mutation.settle:
            self.faults.check("before-child-settle")
            first = await self._hop(child_id, "cascade", actor)
            await self._cascade(first, actor, propagate=False)
        self.faults.check("before-batch-stamp")
        return True

    async def _after(self, instance: Instance) -> None:
        """A child whose parent is owed a stamp asks for a propagation round."""
        if instance.propagateTo is None:
            return
        self.faults.check("before-propagation")
        await self.propagator.request(instance.propagateTo)

    async def _round(self, parent_id: str) -> int | None:
        """One propagation round: stamp the parent's rows, cascade it, propagate further.

        Returns the parent's live rows after it (the propagator sizes its cohort by it).
        """
        try:
            result = await self._verb(parent_id, "propagate", Actor.system(), verbs.plan_hop)
        except InstanceNotFound:  # the parent is gone: the children stop telling it
            await self.lake.collection(self.dataset).update_many(
                {**_INSTANCES, "propagateTo": parent_id},
                {"$unset": {"propagateTo": "", "propagateToken": ""}})
            return None
        return sum(1 for row in result.instance.subworkflows if row.resolved is None)

    async def repair(self, instance_id: str, *, actor: Actor | None = None) -> Instance:
        """Finish what a crash left owed on one instance: drain owed aborts, propagate.

        The heartbeat calls this for terminal instances (an aborted parent whose
        drain was interrupted); in-flight ones are repaired by ``tick``.
        """
        actor = actor or Actor.system()
        instance = await self.get_instance(instance_id)
        instance = await self._drain_condemned(instance, actor)
        await self._after(instance)
        return instance

    async def propagate_to(self, parent_id: str) -> None:
        """Run a propagation round on ``parent_id`` (stamp owed rows, cascade, go up)."""
        await self.propagator.request(parent_id)

    async def settle_propagation(self) -> None:
        """Wait until no propagation round is running in this process (background mode)."""
        await self.propagator.idle()

    async def _drain_condemned(self, instance: Instance, actor: Actor,
                               visited: set[str] | None = None) -> Instance:
        """Carry out aborts owed to condemned children, depth-first, then stamp them (§5.11)."""
        rows = condemned(instance)
        if not rows:
            return instance
        self.faults.check("before-drain")
        visited = visited if visited is not None else set()
        visited.add(instance.id_)
        for row in rows:
            child_id = row.child_id
            if child_id in visited:
                continue
            assert row.abortPending is not None
            verb = verbs.AbortInstance(row.abortPending.reason)

            def abort(state: Instance, ctx: PlanContext,
                      verb: verbs.AbortInstance = verb) -> Mutation:
                return verbs.plan_abort(state, verb, ctx)

            try:
                aborted = await self._commit(child_id, "abortInstance", actor, abort)
            except InstanceNotFound:
                continue
            await self._drain_condemned(aborted.instance, actor, visited)
        ids = [row.child_id for row in rows]

        async def gather(state: Instance, session: AsyncClientSession) -> list[Observation]:
            found = await self.lake.find({"_id": {"$in": ids}}, dataset=self.dataset,
                                         session=session, projection=OBSERVATION_FIELDS)
            by_id = {str(doc["_id"]): doc for doc in found}
            return [Observation.of(by_id[i]) if i in by_id else Observation.missing(i)
                    for i in ids]

        try:
            stamped = await self._observing(instance.id_, "drain", actor, verbs.plan_observe,
                                            gather)
        except InstanceNotFound:
            return instance
        return stamped.instance

    async def _load(self, instance_id: str, session: AsyncClientSession) -> Instance:
        """The instance as of this transaction's snapshot.

        A heavy instance kept from its last commit here is reused when the
        snapshot's ``_rev`` is the kept one (every write to an instance gives it a
        new ``_rev``); planners never modify the state they are given.
        """
        kept = self._kept.get(instance_id)
        if kept is not None:
            found = await self.lake.find({"_id": instance_id}, dataset=self.dataset,
                                         session=session, projection={"_rev": 1, "_type": 1},
                                         limit=1)
            if found and found[0].get("_rev") == kept.rev_:
                self._kept.move_to_end(instance_id)
                return kept
            self._kept.pop(instance_id, None)
        document = await self.lake.get(instance_id, dataset=self.dataset, session=session)
        if document is None or document.get("_type") != INSTANCE_TYPE:
            raise InstanceNotFound(f"no instance {instance_id!r}", instanceId=instance_id)
        if _heavy_document(document):
            state = await asyncio.to_thread(parse_instance, document)
            self._keep(state)
            return state
        return parse_instance(document)

    def _keep(self, state: Instance) -> None:
        self._kept[state.id_] = state
        self._kept.move_to_end(state.id_)
        while len(self._kept) > _KEPT_HEAVY:
            self._kept.popitem(last=False)

    def _context(self, actor: Actor, now: datetime, reads: _Reads) -> PlanContext:
        return PlanContext(
            now=now, actor=actor, dataset=self.dataset, documents=reads.documents,
            absent=reads.absent, query_results=reads.queries, limits=self.limits,
            new_key=self.new_key, new_token=ids.random_token, definitions=reads.definitions,
        )

    async def _plan(
        self,
        plan: Callable[[PlanContext], Mutation],
        actor: Actor,
        session: AsyncClientSession | None,
        *,
        offload: bool = False,
    ) -> Mutation:
        """Plan with one clock reading, satisfying the planner's lake reads as it asks.

        ``offload`` plans in a worker thread (a heavy instance), so the event loop
        keeps serving other requests meanwhile; the plan is pure either way.
        """
        now = self.clock()
        reads = _Reads()
        for _ in range(_IO_ROUNDS):
            try:
                ctx = self._context(actor, now, reads)
                if offload:
                    return await asyncio.to_thread(plan, ctx)
                return plan(ctx)
            except NeedsIO as need:
                await self._satisfy(need, reads, session)
        raise ContractViolation("a plan needed too many lake reads")

    async def _satisfy(self, need: NeedsIO, reads: _Reads,
                       session: AsyncClientSession | None) -> None:
        if isinstance(need, NeedsDocuments):
            by_dataset: dict[str, list[str]] = {}
            for uri in need.uris:
                gdr = to_gdr(uri, self.dataset)
                by_dataset.setdefault(gdr.dataset, []).append(gdr.document_id)
            for dataset, ids in by_dataset.items():
                found = await self.lake.get_many(ids, dataset=dataset, session=session)
                for doc_id in ids:
                    uri = f"lake:{dataset}:{doc_id}"
                    if doc_id in found:
                        reads.documents[uri] = found[doc_id]
                    else:
                        reads.absent.add(uri)
        elif isinstance(need, NeedsLakeQuery):
            reads.queries[need.cache_key] = await self._run_query(need.query, need.params)
        elif isinstance(need, NeedsDefinition):
            if need.version is None:
                definition = await self._latest_definition(need.name, session)
            else:
                definition = await self.lake.get(
                    deploying.definition_id(need.name, need.version), dataset=self.dataset,
                    session=session)
            reads.definitions[(need.name, need.version)] = definition

    async def _run_query(self, query: str, params: dict[str, Any]) -> Any:
        # push-down: a MongoDB prefilter, re-checked in memory. Outside the
        # commit's session on purpose: such reads are seeds (spawn rows,
        # query-sourced fields), not fenced state
        # bounded and off the event loop, like the API's groq field (docs/security.md)
        return await query_collection(self.lake.collection(self.dataset), query,
                                      params=params, now=self.clock(),
                                      budget=self.limits.groq_budget())

    async def _write(self, mutation: Mutation, expected_rev: str | None,
                     session: AsyncClientSession) -> None:
        if mutation.creates:
            self.faults.check("before-spawn-commit")
        heavy = _heavy(mutation.instance)
        if heavy:
            document = await asyncio.to_thread(mutation.instance.to_document)
        else:
            document = mutation.instance.to_document()
        if mutation.insert:
            sizes.check_write(mutation, document, None)
            stored = await self.lake.create(document, dataset=self.dataset, session=session)
            mutation.instance.rev_ = stored["_rev"]
            mutation.instance.createdAt_ = stored.get("_createdAt")
            mutation.instance.updatedAt_ = stored.get("_updatedAt")
        elif mutation.before is not None and expected_rev is not None:
            # targeted: only what changed (a cohort parent is never rewritten whole)
            if heavy:
                update, filters = await asyncio.to_thread(patching.diff, mutation.before,
                                                          document)
            else:
                update, filters = patching.diff(mutation.before, document)
            sizes.check_write(mutation, document, update)
            moment = self.clock()
            if update:
                mutation.instance.rev_ = await self.lake.update(
                    mutation.instance.id_, update, expected_rev=expected_rev,
                    dataset=self.dataset, session=session, array_filters=filters or None,
                    now=moment)
                mutation.instance.updatedAt_ = iso_moment(moment)
                if heavy:  # reused only if this transaction commits (its _rev then exists)
                    self._keep(mutation.instance)
        else:
            sizes.check_write(mutation, document, None)
            stored = await self.lake.replace(document, expected_rev=expected_rev,
                                             dataset=self.dataset, session=session)
            mutation.instance.rev_ = stored["_rev"]
            mutation.instance.createdAt_ = stored.get("_createdAt")
            mutation.instance.updatedAt_ = stored.get("_updatedAt")
        if mutation.creates:
            await self.lake.create_many(mutation.creates[:self.limits.spawn_txn],
                                        dataset=self.dataset, session=session)
        if mutation.clears:
            # honoured stamps. The owed children were read in this transaction by the
            # same indexed filter, so this clears exactly them (a child that changed
            # since gets a write conflict and the round re-runs with a fresh read)
            await self.lake.collection(self.dataset).update_many(
                {**_INSTANCES, "propagateTo": mutation.instance.id_},
                {"$unset": {"propagateTo": "", "propagateToken": ""},
                 "$set": {"_rev": new_rev()}},
                session=session)
        for stamp in mutation.stamps:
            await self.lake.patch(stamp.document_id, stamp.update, dataset=self.dataset,
                                  session=session, array_filters=stamp.array_filters)

    @staticmethod
    def _iso(moment: datetime) -> str:
        from kinflow.core.context import iso

        return iso(moment)
