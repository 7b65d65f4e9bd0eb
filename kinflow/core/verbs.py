"""Verb planners: ``(state, context, verb) -> Mutation``, one per verb.

This module owns what each verb does to an instance in one commit, and the
shape every commit shares:

1. copy the loaded state (the copy is the mutation; the loaded state is never
   touched, so a refusal leaves nothing behind);
2. for keyed verbs, consult the idempotency ledger: a live key of the same
   call replays (no re-application, just the cascade), a key used for another
   verb or other arguments is refused;
3. apply the verb's event (or refuse with a typed error);
4. record the key, then run one cascade hop (triggers to a fixpoint, at
   most one stage move);
5. stamp ``lastChangedAt``, ``nextEvaluationAt`` and the watch-set.

Caller inputs are bounded (``inputs``) before a planner reads anything, and
each Mutation carries the size its write may not pass (``sizes``).

Further hops are separate commits that the runner drives with ``plan_hop``
until one moves nothing. Nothing here does I/O; what a plan needs from the
lake arrives in the ``PlanContext``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kinflow.core import effects as fx
from kinflow.core.actions import fire
from kinflow.core.cascade import hop, next_evaluation_at
from kinflow.core.cohorts import Observation, apply_observations, condemned
from kinflow.core.conditions import Renderer
from kinflow.core.context import PlanContext, iso
from kinflow.core.errors import (
    ActionDisabled,
    ContractViolation,
    EditFieldDenied,
    InitialFieldsInvalid,
    RequiredFieldNotProvided,
)
from kinflow.core.fields import checked_value, find_field, materialise, reference_ids
from kinflow.core.gates import action_verdict, check_params, declared_field
from kinflow.core.history import record
from kinflow.core.inputs import check_key, check_text, check_value, check_values
from kinflow.core.ledger import is_replay, remember
from kinflow.core.mutation import Mutation
from kinflow.core.ops import OpSource, apply_op, set_activity_status
from kinflow.core.sizes import RESOLUTION_BYTES, engine_limit
from kinflow.core.stages import move, prime
from kinflow.core.state import INSTANCE_TYPE, TERMINAL_ACTIVITY, Instance
from kinflow.define import sites
from kinflow.define.models import (
    AppendOp,
    FieldRef,
    LiteralValue,
    SetOp,
    UnsetOp,
    WorkflowDefinition,
    find_action,
)
from kinflow.errors import KinflowError

# ---- the shared commit shape ----


class _Commit:
    """One commit in progress: the mutable copy and the bookkeeping around it."""

    def __init__(self, state: Instance, ctx: PlanContext, *, engine: bool = False) -> None:
        self.before = state.to_json()
        # a JSON round trip is a deep copy an order of magnitude faster than copy.deepcopy
        text = json.dumps(self.before)
        self.before_bytes = len(text)  # the size guard's estimate of the stored document
        self.m = Instance.model_validate_json(text)  # half the cost of json.loads + validate
        # a caller's verb stays under the instance limit; the engine's own commits
        # (hops, stamps, claims) may use the headroom above it (sizes.py)
        self.engine = engine
        self.size_limit: int | None = (engine_limit(ctx.limits.instance_bytes) if engine
                                       else ctx.limits.instance_bytes)
        self.ctx = ctx
        self.definition = self.m.definition_model()
        self.history_start = len(self.m.history)
        self.effects_start = {p.key_ for p in self.m.pendingEffects}
        self.moves = 0
        self.hopped = False

    def replayed(self, key: str | None, op: str, args: dict[str, Any]) -> Mutation | None:
        """The replay of a keyed call already applied (one cascade hop, nothing else)."""
        if not is_replay(self.m, self.ctx, key, op, args):
            return None
        self.cascade_once()
        return self.finish(replay=True)

    def cascade_once(self) -> None:
        self.hopped = True
        if hop(self.m, self.definition, self.ctx).moved:
            self.moves += 1

    def finish(self, *, replay: bool = False, insert: bool = False, result: Any = None,
               clears: list[tuple[str, str]] | None = None) -> Mutation:
        m = self.m
        after = m.to_json()
        changed = insert or _state_differs(self.before, after)
        if changed:
            m.lastChangedAt = self.ctx.now_iso
        finalise(m, self.definition, self.ctx)
        if self.moves and not m.terminal:
            m.nextEvaluationAt = self.ctx.now_iso  # a hop is owed: the heartbeat finishes it
        owed = self.before.get("nextEvaluationAt")
        if not self.hopped and owed and not m.terminal:
            # a commit that ran no hop (a claim, a sweep) cannot settle a due evaluation
            m.nextEvaluationAt = min(owed, m.nextEvaluationAt or owed)
        if self.ctx.creates and len(self.ctx.creates) > self.ctx.limits.spawn_txn:
            m.materialising = True
        if m.parent_id is not None and (insert or _observable(self.before) != m.observable):
            m.propagateTo = m.parent_id  # the parent's row for this child is owed a stamp
            m.propagateToken = self.ctx.new_key()
        dirty = changed or any(self.before.get(k) != after_value
                               for k, after_value in _hints(m).items())
        return Mutation(
            instance=m, insert=insert, changed=changed, dirty=dirty, moves=self.moves,
            creates=list(self.ctx.creates), settle=list(self.ctx.settle),
            effects_queued=[p for p in m.pendingEffects if p.key_ not in self.effects_start],
            history=m.history[self.history_start:], replay=replay, result=result,
            clears=clears or [], before=None if insert else self.before,
            before_bytes=None if insert else self.before_bytes, size_limit=self.size_limit,
            size_reserve=self._reserve(),
        )

    def _reserve(self) -> int:
        """Room a caller's verb must leave for the rows its live children will resolve."""
        if self.engine or self.size_limit is None:
            return 0
        return RESOLUTION_BYTES * sum(1 for row in self.m.subworkflows if row.resolved is None)


_DERIVED = ("lastChangedAt", "nextEvaluationAt", "watch", "_rev", "_createdAt", "_updatedAt",
            "propagateTo", "propagateToken", "owesAborts", "effectsDueAt", "materialising")


def _hints(m: Instance) -> dict[str, Any]:
    return {"nextEvaluationAt": m.nextEvaluationAt, "watch": m.watch or [],
            "propagateTo": m.propagateTo, "propagateToken": m.propagateToken,
            "owesAborts": m.owesAborts, "effectsDueAt": m.effectsDueAt,
            "materialising": m.materialising}


def _observable(before: dict[str, Any]) -> tuple[str, str | None]:
    status = ("aborted" if before.get("abortedAt") else
              "done" if before.get("completedAt") else "active")
    return status, before.get("currentStage") if before.get("stages") else None


def _state_differs(before: dict[str, Any], after: dict[str, Any]) -> bool:
    strip = {k: v for k, v in before.items() if k not in _DERIVED}
    other = {k: v for k, v in after.items() if k not in _DERIVED}
    return strip != other


def finalise(m: Instance, definition: WorkflowDefinition, ctx: PlanContext) -> None:
    """Refresh the derived, persisted hints: when to tick next, which documents to watch."""
    due = next_evaluation_at(m, definition, ctx)
    m.nextEvaluationAt = iso(due) if due is not None else None
    m.watch = reference_ids(m)
    m.owesAborts = True if condemned(m) else None
    m.effectsDueAt = fx.effects_due_at(m)


# ---- start ----


@dataclass(slots=True)
class StartInstance:
    definition: dict[str, Any]  # the stored definition document (with version, contentHash)
    fields: dict[str, Any] | None = None
    instance_id: str | None = None
    context: dict[str, Any] | None = None
    ancestors: list[dict[str, Any]] | None = None


def check_initial_fields(definition: WorkflowDefinition, fields: Any, dataset: str
                         ) -> dict[str, Any]:
    """Caller inputs: every bad row at once, then every missing required field."""
    if fields is None:
        fields = {}
    if not isinstance(fields, dict):
        raise InitialFieldsInvalid("fields must be an object {name: value}",
                                   issues=[{"field": "", "reason": "type"}])
    declared = {entry.name: entry for entry in definition.fields or []}
    issues: list[dict[str, str]] = []
    values: dict[str, Any] = {}
    for name, value in fields.items():
        entry = declared.get(name)
        if entry is None:
            issues.append({"field": name, "reason": "undeclared"})
        elif entry.initialValue is None or entry.initialValue.type != "input":
            issues.append({"field": name, "reason": "not-input"})
        else:
            try:
                values[name] = checked_value(entry, value, dataset)
            except KinflowError as exc:  # FieldValueInvalid, GDR problems
                issues.append({"field": name, "reason": "wrong-kind",
                               "detail": getattr(exc, "message", str(exc))})
    if issues:
        raise InitialFieldsInvalid("initial fields are invalid", issues=issues)
    missing = [
        e.name for e in definition.fields or []
        if e.required and values.get(e.name) in (None, [])
    ]
    if missing:
        raise RequiredFieldNotProvided(
            f"required field(s) not provided: {', '.join(missing)}", fields=missing
        )
    return values


def plan_create(verb: StartInstance, ctx: PlanContext) -> Instance:
    """The unprimed instance document a start creates (commit 1 of the reference)."""
    check_values("fields", verb.fields, ctx.limits)
    check_values("context", verb.context, ctx.limits)
    document = verb.definition
    stored = {k: v for k, v in document.items() if not k.startswith("_")}
    for key in ("version", "contentHash", "modelVersion", "deployedAt"):
        stored.pop(key, None)
    definition = WorkflowDefinition.model_validate(stored)
    inputs = check_initial_fields(definition, verb.fields, ctx.dataset)
    instance_id = verb.instance_id
    if instance_id is None:  # the shell draws ids (kinflow.engine.ids): the core has no entropy
        raise ValueError("plan_create needs an instance id")
    instance = Instance.model_validate({
        "_id": instance_id,
        "_type": INSTANCE_TYPE,
        "dataset": ctx.dataset,
        "definition": definition.name,
        "pinnedVersion": document.get("version", 1),
        "pinnedContentHash": document.get("contentHash"),
        "definitionSnapshot": json.dumps(document, separators=(",", ":")),
        "currentStage": definition.initialStage,
        "ancestors": verb.ancestors or [],
        "startedAt": ctx.now_iso,
        "lastChangedAt": ctx.now_iso,
        "startedBy": ctx.actor.to_json(),
    })
    instance.fields = materialise(
        definition.fields or [], ctx, visible={}, inputs=inputs,
        query_params={"self": ctx.gdr(instance_id), "now": ctx.now_iso},
    )
    instance.context = [_context_entry(name, value, ctx)
                        for name, value in (verb.context or {}).items()]
    record(instance, ctx, "stageEntered", stage=definition.initialStage,
           actor=ctx.actor.to_json())
    return instance


def _context_entry(name: str, value: Any, ctx: PlanContext) -> Any:
    from kinflow.core.state import ContextEntry

    kind: str
    stored: Any
    if isinstance(value, bool):
        kind, stored = "context.boolean", value
    elif isinstance(value, int | float):
        kind, stored = "context.number", value
    elif isinstance(value, str):
        kind, stored = "context.string", value
    elif isinstance(value, dict) and "id" in value:
        kind, stored = "context.ref", value
    else:
        kind, stored = "context.json", json.dumps(value)
    return ContextEntry.model_validate({"_key": ctx.new_key(), "_type": kind, "name": name,
                                        "value": stored})


def plan_start(verb: StartInstance, ctx: PlanContext) -> Mutation:
    """Create, prime and run the first hop, as one insert."""
    created = plan_create(verb, ctx)
    commit = _Commit(created, ctx)
    prime(commit.m, commit.definition, ctx)
    commit.cascade_once()
    return commit.finish(insert=True)


def plan_resume(state: Instance, verb: StartInstance, ctx: PlanContext) -> Mutation:
    """Resume a start whose instance exists: prime if needed, then one hop."""
    name = verb.definition.get("name")
    version = verb.definition.get("version")
    if state.definition != name or (version is not None and state.pinnedVersion != version):
        raise ContractViolation(
            f"instance {state.id_!r} already exists for {state.definition} "
            f"v{state.pinnedVersion}", instanceId=state.id_, definition=state.definition,
            version=state.pinnedVersion,
        )
    commit = _Commit(state, ctx)
    if not commit.m.primed:
        if commit.m.abortedAt:
            raise ContractViolation(f"instance {state.id_!r} was aborted before it was primed",
                                    instanceId=state.id_)
        prime(commit.m, commit.definition, ctx)
    commit.cascade_once()
    return commit.finish()


# ---- cascade hops ----


def plan_hop(state: Instance, ctx: PlanContext,
             observations: list[Observation] | None = None) -> Mutation:
    """One cascade hop (``tick`` and every hop after a verb's own commit).

    What the runner observed about children is stamped on their rows first, so
    the hop's gates see it. An instance left unprimed by a crash between create
    and prime is primed first (kinflow's crash repair; the reference only primes
    on a resumed start).
    """
    commit = _Commit(state, ctx, engine=True)
    clears = apply_observations(commit.m, ctx, observations or [])
    if not commit.m.primed and not commit.m.abortedAt:
        prime(commit.m, commit.definition, ctx)
    if commit.m.primed:
        commit.cascade_once()
    return commit.finish(clears=clears)


def plan_observe(state: Instance, ctx: PlanContext,
                 observations: list[Observation]) -> Mutation:
    """Stamp rows from observations only (the drain's stamp; no hop)."""
    commit = _Commit(state, ctx, engine=True)
    clears = apply_observations(commit.m, ctx, observations)
    return commit.finish(clears=clears)


# ---- fire_action ----


@dataclass(slots=True)
class FireAction:
    activity: str
    action: str
    params: dict[str, Any] | None = None
    idempotency_key: str | None = None


def plan_fire_action(state: Instance, verb: FireAction, ctx: PlanContext) -> Mutation:
    check_key(verb.idempotency_key, ctx.limits)
    check_value("params", verb.params, ctx.limits)
    args = {"activity": verb.activity, "action": verb.action, "params": verb.params or None}
    commit = _Commit(state, ctx)
    m, definition = commit.m, commit.definition
    replay = commit.replayed(verb.idempotency_key, "fireAction", args)
    if replay is not None:
        return replay
    activity = definition.activity(m.currentStage, verb.activity)
    action = find_action(activity, verb.action) if activity else None
    if activity is None or action is None:
        terminal = m.abortedAt or m.completedAt
        reason = "instance-aborted" if m.abortedAt else "instance-completed"
        if terminal:
            raise ActionDisabled(f"{verb.activity}.{verb.action}: {reason}",
                                 activity=verb.activity, action=verb.action, reason=reason)
        raise ContractViolation(
            f"stage {m.currentStage!r} has no action {verb.activity}.{verb.action}",
            stage=m.currentStage, activity=verb.activity, action=verb.action,
        )
    verdict = action_verdict(m, definition, ctx, activity, action, ctx.actor)
    if not verdict.enabled:
        raise ActionDisabled(
            f"{verb.activity}.{verb.action} is disabled: {verdict.reason}",
            activity=verb.activity, action=verb.action, reason=verdict.reason,
            **(verdict.detail or {}),
        )
    params = check_params(action, activity.name, verb.params)
    remember(m, ctx, verb.idempotency_key, "fireAction", args)
    fire(m, definition, ctx, activity.name, action, params)
    commit.cascade_once()
    return commit.finish()


# ---- edit_field ----


@dataclass(slots=True)
class EditField:
    field: str
    value: Any = None
    mode: str = "set"
    scope: str | None = None
    activity: str | None = None
    idempotency_key: str | None = None


def plan_edit_field(state: Instance, verb: EditField, ctx: PlanContext) -> Mutation:
    check_key(verb.idempotency_key, ctx.limits)
    check_value("value", verb.value, ctx.limits)
    args = {"field": verb.field, "value": verb.value, "mode": verb.mode, "scope": verb.scope,
            "activity": verb.activity}
    commit = _Commit(state, ctx)
    m, definition = commit.m, commit.definition
    replay = commit.replayed(verb.idempotency_key, "editField", args)
    if replay is not None:
        return replay
    if verb.mode not in ("set", "append", "unset"):
        raise ContractViolation(f"unknown edit mode {verb.mode!r}", mode=verb.mode)
    scope = _edit_scope(m, verb)
    if scope is None:
        raise ContractViolation(f"no field {verb.field!r} in view", field=verb.field)
    entry = declared_field(definition, m.currentStage, scope, verb.field, verb.activity)

    def deny(reason: str) -> EditFieldDenied:
        return EditFieldDenied(f"{verb.field}: {reason}", field=verb.field, scope=scope,
                               reason=reason)

    if entry is None or entry.editable in (None, False):
        raise deny("not-editable")
    if m.abortedAt:
        raise deny("instance-aborted")
    if m.completedAt:
        raise deny("instance-completed")
    if scope == "activity":
        open_entry = m.open_entry()
        act = open_entry.activity(verb.activity or "") if open_entry else None
        if act is None or act.status != "active":
            raise deny("edit-window-closed")
    renderer = Renderer(m, definition, ctx)
    predicates = [entry.editable] if isinstance(entry.editable, str) else []
    stage = definition.stage(m.currentStage)
    override = (stage.editable or {}).get(verb.field) if stage else None
    if isinstance(override, str):
        predicates.append(override)
    for text in predicates:
        if not renderer.check(text, sites.FIELD_EDITABLE, verb.activity,
                              actor=ctx.actor).satisfied:
            raise deny("editor-not-permitted")
    remember(m, ctx, verb.idempotency_key, "editField", args)
    target = FieldRef(scope=scope, field=verb.field)
    op: Any
    if verb.mode == "set":
        op = SetOp(type="field.set", target=target, value=LiteralValue(type="literal",
                                                                        value=verb.value))
    elif verb.mode == "append":
        op = AppendOp(type="field.append", target=target,
                      value=LiteralValue(type="literal", value=verb.value))
    else:
        op = UnsetOp(type="field.unset", target=target)
    apply_op(op, m, definition, ctx, OpSource(activity=verb.activity, edit=True))
    commit.cascade_once()
    return commit.finish()


def _edit_scope(m: Instance, verb: EditField) -> str | None:
    if verb.scope is not None:
        return verb.scope if find_field(m, verb.scope, verb.field, verb.activity) else None
    for scope in ("activity", "stage", "workflow"):
        if scope == "activity" and verb.activity is None:
            continue
        if find_field(m, scope, verb.field, verb.activity) is not None:
            return scope
    return None


# ---- effects ----


@dataclass(slots=True)
class CompleteEffect:
    effect_key: str
    status: str
    outputs: dict[str, Any] | None = None
    error: str | None = None
    detail: str | None = None
    duration_ms: int | None = None
    idempotency_key: str | None = None


def plan_complete_effect(state: Instance, verb: CompleteEffect, ctx: PlanContext) -> Mutation:
    check_key(verb.idempotency_key, ctx.limits)
    check_value("outputs", verb.outputs, ctx.limits)
    check_text("error", verb.error, ctx.limits)
    check_text("detail", verb.detail, ctx.limits)
    # the duration is a measurement, not part of what the call asks for
    args = {"effectKey": verb.effect_key, "status": verb.status, "outputs": verb.outputs,
            "error": verb.error, "detail": verb.detail}
    commit = _Commit(state, ctx)
    m = commit.m
    replay = commit.replayed(verb.idempotency_key, "completeEffect", args)
    if replay is not None:
        return replay
    remember(m, ctx, verb.idempotency_key, "completeEffect", args)
    run = fx.complete(m, commit.definition, ctx, verb.effect_key, verb.status, verb.outputs,
                      verb.error, verb.detail, verb.duration_ms)
    commit.cascade_once()
    return commit.finish(result=run)


def plan_claim_effect(state: Instance, effect_key: str, lease_seconds: float,
                      ctx: PlanContext) -> Mutation:
    commit = _Commit(state, ctx, engine=True)
    claimed = fx.claim(commit.m, ctx, effect_key, lease_seconds)
    return commit.finish(result=claimed)


def plan_sweep(state: Instance, ctx: PlanContext) -> Mutation:
    commit = _Commit(state, ctx, engine=True)
    released = fx.sweep_claims(commit.m, ctx)
    return commit.finish(result=released)


# ---- admin verbs ----


@dataclass(slots=True)
class AbortInstance:
    reason: str | None = None
    idempotency_key: str | None = None


def plan_abort(state: Instance, verb: AbortInstance, ctx: PlanContext) -> Mutation:
    """Close the instance in place: condemn live rows, cancel effects (§5.11 step 2).

    Never refused for size: it writes a few hundred bytes, and a cascade that
    condemned this instance must be able to finish (sizes.py).
    """
    check_key(verb.idempotency_key, ctx.limits)
    check_text("reason", verb.reason, ctx.limits)
    args = {"reason": verb.reason}
    commit = _Commit(state, ctx)
    commit.size_limit = None
    m = commit.m
    if is_replay(m, ctx, verb.idempotency_key, "abortInstance", args) or m.terminal:
        return commit.finish(replay=True)
    remember(m, ctx, verb.idempotency_key, "abortInstance", args)
    entry = m.open_entry()
    if entry is not None:
        entry.exitedAt = ctx.now_iso
    from kinflow.core.state import AbortPending

    for row in m.subworkflows:
        if row.resolved is None and row.abortPending is None:
            row.abortPending = AbortPending(at=ctx.now_iso, reason="parent instance aborted")
    fx.cancel_all(m, ctx)
    record(m, ctx, "aborted", stage=m.currentStage, reason=verb.reason,
           actor=ctx.actor.to_json())
    m.completedAt = m.abortedAt = ctx.now_iso
    return commit.finish()


@dataclass(slots=True)
class SetStage:
    stage: str
    reason: str | None = None
    idempotency_key: str | None = None


def plan_set_stage(state: Instance, verb: SetStage, ctx: PlanContext) -> Mutation:
    check_key(verb.idempotency_key, ctx.limits)
    check_text("reason", verb.reason, ctx.limits)
    args = {"stage": verb.stage, "reason": verb.reason}
    commit = _Commit(state, ctx)
    m, definition = commit.m, commit.definition
    replay = commit.replayed(verb.idempotency_key, "setStage", args)
    if replay is not None:
        return replay
    target = definition.stage(verb.stage)
    if target is None:
        raise ContractViolation(f"no stage {verb.stage!r} in {definition.name}",
                                stage=verb.stage)
    if m.terminal or m.currentStage == verb.stage:
        return commit.finish()
    remember(m, ctx, verb.idempotency_key, "setStage", args)
    move(m, definition, target, ctx, transition=f"setStage:{m.currentStage}->{verb.stage}",
         via="setStage", reason=verb.reason)
    commit.moves += 1
    return commit.finish()


@dataclass(slots=True)
class ResetActivity:
    activity: str
    to: str = "active"
    idempotency_key: str | None = None


def plan_reset_activity(state: Instance, verb: ResetActivity, ctx: PlanContext) -> Mutation:
    check_key(verb.idempotency_key, ctx.limits)
    args = {"activity": verb.activity, "to": verb.to}
    commit = _Commit(state, ctx)
    m = commit.m
    replay = commit.replayed(verb.idempotency_key, "resetActivity", args)
    if replay is not None:
        return replay
    if verb.to not in ("active", "skipped"):
        raise ContractViolation("an activity resets to 'active' or 'skipped'", to=verb.to)
    if m.terminal:
        return commit.finish()
    entry = m.open_entry()
    found = entry.activity(verb.activity) if entry else None
    if found is None:
        raise ContractViolation(f"activity {verb.activity!r} is not in the current stage",
                                activity=verb.activity)
    if found.status == verb.to:
        return commit.finish()
    if found.status not in TERMINAL_ACTIVITY:
        raise ContractViolation(
            f"activity {verb.activity!r} is {found.status}; only a finished activity resets",
            activity=verb.activity, status=found.status,
        )
    remember(m, ctx, verb.idempotency_key, "resetActivity", args)
    set_activity_status(m, ctx, verb.activity, verb.to)
    commit.cascade_once()
    return commit.finish()
