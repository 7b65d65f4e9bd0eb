"""The one commit planner: the shape every commit shares, and settling.

Every planner (``verbs``) builds its mutation through a ``Commit``:

1. copy the loaded state (the copy is the mutation; the loaded state is never
   touched, so a refusal leaves nothing behind);
2. for keyed verbs, consult the idempotency ledger: a live key of the same
   call replays (no re-application, just the cascade), a key used for another
   verb or other arguments is refused;
3. apply the verb's event (or refuse with a typed error);
4. record the key, then run one cascade hop (triggers to a fixpoint, at
   most one stage move);
5. stamp ``lastChangedAt``, ``nextEvaluationAt`` and the watch-set.

Children a hop spawns are created here, settled: ``settle_child`` creates and
primes each one and runs its hops in the same bounded loop (``settle``) the
verbs use, so the parent's registry row already reads what the child did. A
child whose hop would spawn grandchildren is created primed and listed in
``Mutation.settle``; the shell cascades it after the commit. Its documents
go on ``Mutation.creates``; the shell writes them in the parent's
transaction (past ``limits.spawn_txn``, the rest right after).

Further hops are separate commits that the shell drives with
``verbs.plan_hop``, checking ``check_moves`` each round. Nothing here does
I/O; what a plan needs from the lake arrives in the ``PlanContext``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from kinflow.core import cancellation, readmodel
from kinflow.core import effects as fx
from kinflow.core.actions import Spawner
from kinflow.core.cascade import hop, next_evaluation_at
from kinflow.core.cohort import (
    admission,
    counts,
    deadlines,
    settlement,
    sparse,
    spawn,
    sweep,
    tallies,
    window,
)
from kinflow.core.cohort import budget as failure_budget
from kinflow.core.cohort.aggregates import refresh as fold_aggregates
from kinflow.core.cohort.chunks import CHUNK, REPLACED, row_writes
from kinflow.core.cohort.observe import condemned
from kinflow.core.cohort.row_history import history_index, inline_history
from kinflow.core.context import Limits, PlanContext, iso
from kinflow.core.create import StartInstance, plan_create
from kinflow.core.errors import (
    CascadeLimit,
)
from kinflow.core.fields import reference_ids
from kinflow.core.inputs import check_key
from kinflow.core.ledger import is_replay
from kinflow.core.mutation import Mutation
from kinflow.core.sizes import RESOLUTION_BYTES, engine_limit
from kinflow.core.stages import prime
from kinflow.core.state import (
    Instance,
    SubworkflowEntry,
)
from kinflow.define.models import WorkflowDefinition


class Commit:
    """One commit in progress: the mutable copy and the bookkeeping around it."""

    def __init__(self, state: Instance, ctx: PlanContext, *, engine: bool = False) -> None:
        self.before = state.stored_json()
        # a JSON round trip is a deep copy an order of magnitude faster than copy.deepcopy
        text = json.dumps(self.before)
        # the size guard's estimate of the stored document
        self.before_bytes = len(text) + len(json.dumps(list(history_index(state).inline)))
        self.m = Instance.model_validate_json(text)  # half the cost of json.loads + validate
        # rows are frozen and history entries never edited, so the copy shares them
        # (core/cohort/chunks.py); the rows stored beside the instance are what writes diff against
        rows = state.subworkflows
        if isinstance(rows, sparse.SparseRows):  # only the chunks this commit reads
            self.m.subworkflows = cast(Any, rows.copy())
            self.rows_base: Any = rows.copy()
        else:
            self.m.subworkflows = list(rows)
            self.rows_base = rows[:state.rowCount or 0]
        self.m._derived = dict(state._derived)  # memos checked against the rows (state.py)
        self.m.history = list(state.history)
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
        self.creates: list[dict[str, Any]] = []  # child documents planned
        self.settle: list[str] = []  # children whose cascade the shell owes

    @classmethod
    def keyed(cls, state: Instance, ctx: PlanContext, key: str | None, op: str,
              args: dict[str, Any], check: Callable[[], None] | None = None
              ) -> tuple[Commit, Mutation | None]:
        """A keyed verb's commit, and its replay when ``key`` already applied this call.

        The key is bounded first, then ``check`` bounds the verb's other inputs.
        """
        check_key(key, ctx.limits)
        if check is not None:
            check()
        commit = cls(state, ctx)
        return commit, commit.replayed(key, op, args)

    def replayed(self, key: str | None, op: str, args: dict[str, Any]) -> Mutation | None:
        """The replay of a keyed call already applied (one cascade hop, nothing else)."""
        if not is_replay(self.m, self.ctx, key, op, args):
            return None
        self.cascade_once()
        return self.finish(replay=True)

    def spawner(self, instance: Instance, plan: Callable[[], list[spawn.ChildSeed]]) -> bool:
        """This commit's ``Spawner``: every child created settled and registered, but
        those beyond their cohort's window, registered queued (core/cohort/window.py)."""
        active: dict[window.Cohort, int] | None = None
        regulated = False
        for seed in plan():
            key = (seed.activity, seed.entry_key)
            if admission.regulated(admission.spawn_block(
                    self.definition, seed.stage, seed.activity, seed.action),
                    admission.setting(instance, key)):
                spawn.register_queued(instance, self.ctx, seed)  # the fill below chooses
                regulated = True
                continue
            cap = self._window(instance, seed)
            if cap is not None:
                active = window.active_counts(instance) if active is None else active
                if active.get(key, 0) >= cap:
                    spawn.register_queued(instance, self.ctx, seed)
                    continue
            child, owed = settle_child(instance, seed, self.ctx)
            child.rowPlace = len(instance.subworkflows)  # register appends its row there
            self.creates.append(child.to_document())
            if owed:
                self.settle.append(seed.child_id)
            spawn.register(instance, self.ctx, seed, child)
            if active is not None and not child.terminal:
                active[key] = active.get(key, 0) + 1
        if regulated:  # priority, keys, a rate or a pause choose the first rows to start
            window.fill(instance, self.definition, self.ctx, self.start_queued)
        # children that failed at once may exceed a budget: act before the hop goes on
        self.settle_rows()  # (a failure with a retry left is re-queued, not counted)
        failure_budget.enforce(instance, self.definition, self.ctx)
        return True

    def _window(self, instance: Instance, seed: spawn.ChildSeed) -> int | None:
        own = window.setting(instance, (seed.activity, seed.entry_key))
        if own is not None and own.maxActive is not None:
            return own.maxActive
        return window.declared_max(self.definition, seed.stage, seed.activity, seed.action)

    def start_queued(self, index: int) -> bool:
        """Create the child of queued row ``index`` as a spawn would; whether it is live."""
        m, ctx = self.m, self.ctx
        row = m.subworkflows[index]
        assert row.seed is not None
        child_doc = ctx.definition(row.definition, row.seed.version)
        if child_doc is None:  # undeployed since the spawn: the row can never start
            window.skip(m, ctx, index, detail="definition-unresolved")
            return False
        child, owed = settle_child(m, spawn.reseed(m, row, child_doc, ctx), ctx)
        child.rowPlace = index
        self.creates.append(child.to_document())
        if owed:
            self.settle.append(child.id_)
        spawn.start_row(m, ctx, index, child)
        return not child.terminal

    def fill_windows(self) -> bool:
        """Start queued rows where their window has room; whether a started child
        finished at once, or a prioritised fill of a sparse parent stopped at its commit's
        chunk bound (either way the parent owes an evaluation)."""
        before = len(self.creates)
        window.fill(self.m, self.definition, self.ctx, self.start_queued)
        deferred = bool(self.m._derived.pop(window.DEFERRED, False))  # the bound was spent
        return deferred or any(doc.get("completedAt") for doc in self.creates[before:])

    def settle_rows(self) -> settlement.Settled:
        """Deadlines, retries and quorums over the rows this commit changed
        (core/cohort/settlement.py)."""
        return settlement.apply(self.m, self.definition, self.ctx, self.rows_base)

    def cascade_once(self) -> None:
        self.settle_rows()
        failure_budget.enforce(self.m, self.definition, self.ctx)  # the hop sees it failed
        self.fill_windows()  # the hop's gates see the window as full as it can be
        self.hopped = True
        self.moves += settle(self.m, self.definition, self.ctx, self.spawner, budget=1).moves

    def finish(self, *, replay: bool = False, insert: bool = False, result: Any = None,
               clears: list[tuple[str, str]] | None = None) -> Mutation:
        m = self.m
        # a cancelling instance whose cancel stage finished and whose rows all settled
        # is CANCELLED by whichever commit sees it (core/cancellation.py)
        cancellation.conclude(m, self.definition, self.ctx)
        # a budget exceeded in this commit acts first (its queued rows never start), and
        # a hop is owed when it failed the activity after this commit's hop ran
        owes_hop = self.settle_rows().completed > 0
        owes_hop = failure_budget.enforce(self.m, self.definition, self.ctx) or owes_hop
        owes_hop = self.fill_windows() or owes_hop  # what this commit resolved frees its place
        if self.settle_rows().retried:  # a child the fill started failed at once
            owes_hop = self.fill_windows() or owes_hop
        new_history = m.history[self.history_start:]
        whole = sparse.history_start(self.before, self.history_start, m)
        rows = row_writes(m, self.rows_base, new_history, whole)
        if rows:  # the cohorts' counts follow the chunks this commit rewrites
            m.cohortRows = tallies.updated(m.cohortRows, self.rows_base, m.subworkflows,
                                                [doc["chunk"] for doc in rows.chunks])
            fold_aggregates(m, self.definition, self.rows_base,  # in the same commit
                            [doc["chunk"] for doc in rows.chunks], CHUNK)
            sweep.keep_owed(m, self.rows_base, [doc["chunk"] for doc in rows.chunks],
                            self.ctx.limits.sparse_rows)  # where owed rows are
        m._derived.pop(REPLACED, None)  # the summary follows the rows now (cohort/counts.py)
        if m.subworkflows:
            m.rowCount = len(m.subworkflows)
        sparse.count_history(m, whole + len(new_history), self.ctx.limits.sparse_rows)
        after = m.stored_json()
        changed = insert or bool(rows) or bool(new_history) or _state_differs(self.before,
                                                                              after)
        if changed:
            m.lastChangedAt = self.ctx.now_iso
        finalise(m, self.definition, self.ctx)
        if (self.moves or owes_hop) and not m.terminal:
            m.nextEvaluationAt = self.ctx.now_iso  # a hop is owed: the heartbeat finishes it
        owed = self.before.get("nextEvaluationAt")
        if not self.hopped and owed and not m.terminal:
            # a commit that ran no hop (a claim, a sweep) cannot settle a due evaluation
            m.nextEvaluationAt = min(owed, m.nextEvaluationAt or owed)
        if len(self.creates) > self.ctx.limits.spawn_txn:
            m.materialising = True
        if m.parent_id is not None and (
                insert or readmodel.observable(self.before) != m.observable
                or readmodel.cancelling(self.before) != m.cancelling):
            m.propagateTo = m.parent_id  # the parent's row for this child is owed a stamp
            m.propagateToken = self.ctx.new_key()
        dirty = changed or any(self.before.get(k) != after_value
                               for k, after_value in _hints(m).items())
        if sparse.is_sparse(m):  # the entries on rows live in their chunks (sparse.bound)
            m.history = inline_history(m.history)
        return Mutation(
            instance=m, insert=insert, changed=changed, dirty=dirty, moves=self.moves,
            creates=self.creates, settle=self.settle,
            effects_queued=[p for p in m.pendingEffects if p.key_ not in self.effects_start],
            history=new_history, rows=rows, replay=replay, result=result,
            clears=clears or [], before=None if insert else self.before,
            before_bytes=None if insert else self.before_bytes, size_limit=self.size_limit,
            size_reserve=self._reserve(),
        )

    def _reserve(self) -> int:
        """Room a caller's verb must leave for the rows its live children will resolve."""
        if self.engine or self.size_limit is None:
            return 0
        return RESOLUTION_BYTES * live_count(self.m)


def live_count(m: Instance) -> int:
    """Unresolved rows (live or queued): from the cohorts' counts on a sparse parent."""
    if sparse.is_sparse(m):
        return sum(tallies.unfinished(entry) for entry in counts.live_summary(m))
    return sum(1 for row in m.subworkflows if row.resolved is None)


_DERIVED = ("lastChangedAt", "nextEvaluationAt", "watch", "_rev", "_createdAt", "_updatedAt",
            "propagateTo", "propagateToken", "owesAborts", "effectsDueAt", "materialising",
            "rowCount", "owesCancels", "owing")


def _hints(m: Instance) -> dict[str, Any]:
    return {"nextEvaluationAt": m.nextEvaluationAt, "watch": m.watch or [],
            "propagateTo": m.propagateTo, "propagateToken": m.propagateToken,
            "owesAborts": m.owesAborts, "effectsDueAt": m.effectsDueAt,
            "materialising": m.materialising, "rowCount": m.rowCount,
            "owesCancels": m.owesCancels}


def _state_differs(before: dict[str, Any], after: dict[str, Any]) -> bool:
    strip = {k: v for k, v in before.items() if k not in _DERIVED}
    other = {k: v for k, v in after.items() if k not in _DERIVED}
    return strip != other


def finalise(m: Instance, definition: WorkflowDefinition, ctx: PlanContext) -> None:
    """Refresh the derived, persisted hints: when to tick next, which documents to watch."""
    due = next_evaluation_at(m, definition, ctx)
    deadline = cancellation.due(m)  # a cancellation's timeout is the heartbeat's tick too
    if deadline is not None and (due is None or deadline < due):
        due = deadline
    if m.subworkflows and deadlines.settles(definition):  # a child's deadline, a retry's time
        settling = deadlines.due(m, ctx.now)
        if settling is not None and (due is None or settling < due):
            due = settling
    if m.subworkflows and admission.rated(m, definition):  # a start rate's next slot
        slot = admission.due(m, definition, window.occupancy(m).waiting, ctx.now)
        if slot is not None and (due is None or slot < due):
            due = slot
    m.nextEvaluationAt = iso(due) if due is not None else None
    m.watch = reference_ids(m)
    if sweep.pages(m):  # the chunks holding owed rows are kept (core/cohort/sweep.py)
        m.owesAborts = True if sweep.owes(m, sweep.ABORTS) else None
        m.owesCancels = True if sweep.owes(m, sweep.CANCELS) else None
    elif sparse.is_sparse(m):  # a row changes only in a chunk held: look there, unless owed
        held = [row for _, row in sparse.held_rows(m)]
        m.owesAborts = True if (m.owesAborts and condemned(m)) or any(
            r.resolved is None and r.abortPending is not None for r in held) else None
        m.owesCancels = True if (m.owesCancels and cancellation.owed(m)) or any(
            cancellation.owes(r) for r in held) else None
    else:
        m.owesAborts = True if condemned(m) else None
        m.owesCancels = True if cancellation.owed(m) else None
    if m.terminal:
        m.cancelDeadline = None
    m.effectsDueAt = fx.effects_due_at(m)


# ---- settling: the one bounded loop ----


@dataclass(frozen=True, slots=True)
class Settled:
    """What one bounded settle loop did."""

    moves: int
    owed: bool  # stopped by the move budget or by a spawn that had to wait
    waited: bool = False  # a hop's spawn had to wait: that hop is half done


def settle(m: Instance, definition: WorkflowDefinition, ctx: PlanContext, spawner: Spawner,
           *, budget: int) -> Settled:
    """Hop until a hop moves nothing, the instance ends or ``budget`` moves are made.

    Verbs settle one hop per commit (``budget=1``); a child created inside its
    parent's spawn settles up to ``limits.cascade_moves``.
    """
    moves = 0
    while not m.terminal and moves < budget:
        step = hop(m, definition, ctx, spawner)
        if step.waited:
            return Settled(moves, owed=True, waited=True)
        if not step.moved:
            break
        moves += 1
    return Settled(moves, owed=moves >= budget)


def check_moves(moves: int, limits: Limits, instance: Instance) -> None:
    """Refuse a cascade that moved ``limits.cascade_moves`` times (a transition ping-pong)."""
    if moves >= limits.cascade_moves:
        raise CascadeLimit(
            f"instance {instance.id_!r} moved {moves} times in one cascade",
            instanceId=instance.id_, limit=limits.cascade_moves, stage=instance.currentStage,
        )


def _waiting(instance: Instance, plan: Callable[[], list[spawn.ChildSeed]]) -> bool:
    """A settling child's spawner: its spawns wait for the shell (nothing is planned)."""
    return False


def settle_child(parent: Instance, seed: spawn.ChildSeed, ctx: PlanContext
                 ) -> tuple[Instance, bool]:
    """The child ``seed`` plans, primed and settled as far as a pure plan can take it.

    Returns the child and whether the shell still owes its cascade: a hop
    wanted to spawn grandchildren (the child is then created just primed, and
    the shell runs those hops as commits of its own), or the moves ran out.
    """
    child, model = _primed(parent, seed, ctx)
    settled = settle(child, model, ctx, _waiting, budget=ctx.limits.cascade_moves)
    if settled.waited:  # its hops are dropped: plan the primed child afresh
        child, model = _primed(parent, seed, ctx)
    finalise(child, model, ctx)
    if settled.owed:
        child.nextEvaluationAt = ctx.now_iso  # the heartbeat finishes it after a crash
    return child, settled.owed


def _primed(parent: Instance, seed: spawn.ChildSeed, ctx: PlanContext
            ) -> tuple[Instance, WorkflowDefinition]:
    handoff = {"parent": parent.definition, "stage": seed.stage, "activity": seed.activity,
               "action": seed.action, "child": seed.definition}
    verb = StartInstance(seed.definition_doc, seed.inputs, seed.child_id, seed.context,
                         seed.ancestors, handoff)
    child = plan_create(verb, ctx)
    child.parentInstance = parent.id_
    model = child.definition_model()
    prime(child, model, ctx)
    return child, model


def plan_materialise(parent: Instance, owed: list[tuple[int, SubworkflowEntry]],
                     ctx: PlanContext) -> list[dict[str, Any]]:
    """The child documents of seeded rows a crash left uncreated (a large spawn's rest),
    each knowing its row's place."""
    documents = []
    for place, row in owed:
        assert row.seed is not None
        child_doc = ctx.definition(row.definition, row.seed.version)
        if child_doc is None:
            continue
        child, _ = settle_child(parent, spawn.reseed(parent, row, child_doc, ctx), ctx)
        child.rowPlace = place
        documents.append(child.to_document())
    return documents
