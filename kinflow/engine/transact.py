"""The one commit path: load, plan purely, write through the lake, in one transaction.

Every commit has the same shape:

1. inside one MongoDB transaction, load the instance (with its ``_rev``);
2. read the clock **once**; plan purely with it: ``planner(state, ctx)`` (or
   ``planner(state, ctx, seen)`` with what ``gather`` read about children).
   When the planner asks for a lake read it was not given (``NeedsIO``), read
   it inside the same transaction and plan again from scratch;
3. write the mutation with that same moment: insert a new instance; else the
   diff (``patch.diff``) applied with ``Lake.update`` fenced on the loaded
   ``_rev``; a whole replace only when there is no ``before``; the registry
   row documents the plan added or changed (``engine/rowstore.py``); the children a
   spawn planned (up to ``limits.spawn_txn``) and the honoured propagation
   stamps go in the same transaction;
4. a conflict anywhere (write conflict, fence miss) re-runs the whole
   callback with a fresh load; after the lake's bounded attempts the caller
   gets ``concurrent-modification`` naming the verb. A refusal raised by the
   planner aborts the transaction: nothing is written.

Every write goes through ``Lake`` (deadlines, typed lake errors).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kinflow.core import deploy as deploying
from kinflow.core import patch as patching
from kinflow.core.cohort import sparse
from kinflow.core.cohort.observe import Observation
from kinflow.core.cohort.row_history import inline_history
from kinflow.core.context import (
    Actor,
    Limits,
    NeedsChunks,
    NeedsDefinition,
    NeedsDocuments,
    NeedsIO,
    NeedsKeyChunks,
    NeedsLakeQuery,
    NeedsRowBatch,
    PlanContext,
)
from kinflow.core.errors import ChildIdTaken, InstanceNotFound, PlanReadLimit
from kinflow.core.mutation import Mutation
from kinflow.core.state import INSTANCE_TYPE, Instance, parse_instance
from kinflow.engine import collector, ids, sizes, sparse_load
from kinflow.engine.faults import Faults
from kinflow.engine.first_batch import batch_for, committing
from kinflow.engine.rowstore import RowStore
from kinflow.errors import DocumentExists
from kinflow.gdr import to_gdr
from kinflow.observability import engine as observing
from kinflow.storage.lake import Lake
from kinflow.timestamps import iso

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession

Clock = Callable[[], datetime]
Planner = Callable[..., Mutation]  # (state, ctx) or, with a gather, (state, ctx, seen)
Runner = Callable[[Callable[[], Any]], Awaitable[Any]]  # runs a plan in a chosen thread
Gather = Callable[[Instance, "AsyncClientSession"], Awaitable[list[Observation]]]
IO_ROUNDS = 32
# registry rows + history rows from which parsing, planning and diffing an instance
# leave the event loop: on a cohort parent they take 0.1-1 s (docs/performance.md),
# which would stall every request the process serves meanwhile
HEAVY_PARTS = 512
CLEARS_PER_STATEMENT = 64  # honoured stamps cleared per lake statement
Batch = list[tuple[Mutation, dict[str, Any], list[dict[str, Any]]]]
BATCHED: ContextVar[Batch | None] = ContextVar("kinflow_batched_updates", default=None)
"""Set by a group commit: instance updates to send in one statement (mutation, ops, filters)."""
_KEPT_HEAVY = 8  # heavy instances (cohort parents) kept parsed between commits, by _rev


def heavy(instance: Instance) -> bool:
    return len(instance.subworkflows) + len(instance.history) > HEAVY_PARTS


def _heavy_document(document: dict[str, Any]) -> bool:
    rows, history = document.get("subworkflows"), document.get("history")
    return (len(rows) if isinstance(rows, list) else 0) + (
        len(history) if isinstance(history, list) else 0) > HEAVY_PARTS


def targeted_update(mutation: Mutation, document: dict[str, Any]
                    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The update turning the loaded document into ``document``: the diff of the
    instance's own state, the new inline history entries appended."""
    assert mutation.before is not None
    own = {key: value for key, value in document.items() if key != "history"}
    update, filters = patching.diff(mutation.before, own)
    appended = inline_history(mutation.history)
    if appended:
        update.setdefault("$push", {})["history"] = {"$each": appended}
    if mutation.rows and not update:  # a row written gives its parent a new _rev too
        update["$set"] = {"rowCount": len(mutation.instance.subworkflows)}
    if mutation.rows and not mutation.before.get("rowCount"):
        # the first rows stored beside it: drop rows an older engine kept inline
        update.setdefault("$unset", {})["subworkflows"] = ""
    return update, filters


def child_taken(parent_id: str, batch: list[dict[str, Any]], exc: DocumentExists
                ) -> ChildIdTaken:
    """The refusal of a commit whose child creates met a document already there.

    The commit read its parent in this transaction and planned only children
    the parent has not created, so the document is not one of its children: a
    write that bypassed the engine put it there. A retry would meet it again;
    the refusal is permanent, and the heartbeat parks the parent.
    """
    child = _duplicate_id(exc.__cause__, batch)
    return ChildIdTaken(
        f"instance {parent_id!r} cannot create its child {child or '(one of a batch)'}: a "
        "document the engine did not write is already at that id",
        instanceId=parent_id, childId=child, children=len(batch))


def _duplicate_id(cause: BaseException | None, batch: list[dict[str, Any]]) -> str | None:
    """The id the lake reports as already taken (the first failed insert of the batch)."""
    details = getattr(cause, "details", None)
    if not isinstance(details, dict):
        return None
    errors = details.get("writeErrors")
    first = errors[0] if isinstance(errors, list) and errors else details
    index = first.get("index") if isinstance(first, dict) else None
    if isinstance(index, int) and 0 <= index < len(batch):
        return str(batch[index]["_id"])
    key = first.get("keyValue") if isinstance(first, dict) else None
    return str(key["_id"]) if isinstance(key, dict) and "_id" in key else None


@dataclass(slots=True)
class Reads:
    """Lake reads gathered for one plan; kept across its re-plans."""

    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    absent: set[str] = field(default_factory=set)
    queries: dict[str, Any] = field(default_factory=dict)
    definitions: dict[tuple[str, int | None], dict[str, Any] | None] = field(
        default_factory=dict)


class Transactor:
    """Commits plans on one dataset; keeps a few heavy instances parsed between commits."""

    def __init__(self, lake: Lake, dataset: str, *, clock: Clock, limits: Limits,
                 new_key: Callable[[], str], faults: Faults,
                 after_commit: Callable[[Mutation], Awaitable[None]]) -> None:
        self.lake = lake
        self.dataset = dataset
        self.clock = clock
        self.limits = limits
        self.new_key = new_key
        self.faults = faults
        self.after_commit = after_commit
        # the last committed state of a few heavy instances: a round on a cohort
        # parent then reads only its _rev instead of reading and parsing megabytes
        self.kept: OrderedDict[str, Instance] = OrderedDict()
        self.rows = RowStore(lake, dataset)

    async def commit(
        self,
        instance_id: str,
        planner: Planner,
        *,
        verb: str,
        actor: Actor,
        gather: Gather | None = None,
        create: Callable[[PlanContext], Mutation] | None = None,
        attempts: int | None = None,
        always_write: bool = False,
    ) -> Mutation:
        """One transaction on ``instance_id``; ``create`` plans it when it does not exist."""

        async def callback(session: AsyncClientSession) -> Mutation:
            now = self.clock()
            if create is not None:  # a start: create, or resume the one already there
                existing = await self.lake.get(instance_id, dataset=self.dataset,
                                               session=session)
                if existing is None:
                    mutation = await self.plan(create, actor, session, now)
                    await self.write(mutation, None, session, now)
                    return mutation
                state = parse_instance(existing)
                if state.rowCount:
                    await self._rows_of(state, existing, session)
            else:
                state = await self.load(instance_id, session)
            if gather is not None:
                seen = await gather(state, session)
                await self._up_front(state, [o.place for o in seen], session)
                mutation = await self.plan(lambda ctx: planner(state, ctx, seen), actor,
                                           session, now, offload=heavy(state), state=state)
            else:
                await self._up_front(state, [], session)
                mutation = await self.plan(lambda ctx: planner(state, ctx), actor, session,
                                           now, offload=heavy(state), state=state)
            if mutation.dirty or always_write:
                await self.write(mutation, state.rev_, session, now)
            return mutation

        with collector.held(instance_id in self.kept):  # a kept parent (engine/collector.py)
            with observing.commit(verb) as seen:
                mutation = await committing(self, lambda: self.lake.transaction(
                    callback, verb=verb, attempts=attempts, on_retry=seen.retry))
            await self.after_commit(mutation)
        return mutation

    async def load(self, instance_id: str, session: AsyncClientSession | None) -> Instance:
        """The instance as of this transaction's snapshot.

        A heavy instance kept from its last commit here is reused when the
        snapshot's ``_rev`` is the kept one (every write to an instance gives it a
        new ``_rev``); planners never modify the state they are given.
        """
        kept = self.kept.get(instance_id)
        if kept is not None:
            found = await self.lake.find({"_id": instance_id}, dataset=self.dataset,
                                         session=session, projection={"_rev": 1, "_type": 1},
                                         limit=1)
            if found and found[0].get("_rev") == kept.rev_:
                self.keep(kept)  # (another task may have dropped it meanwhile)
                # a sparse parent's plans read chunks into their own copy (sparse_load.py)
                return sparse_load.private(kept)
            self.kept.pop(instance_id, None)
        document = await self.lake.get(instance_id, dataset=self.dataset, session=session)
        if document is None or document.get("_type") != INSTANCE_TYPE:
            raise InstanceNotFound(f"no instance {instance_id!r}", instanceId=instance_id)
        observing.loaded(document)
        if _heavy_document(document):
            state = await asyncio.to_thread(parse_instance, document)
        else:
            state = parse_instance(document)
        if state.rowCount:
            # its registry rows, read in this transaction's snapshot; a parent is kept
            # parsed so its next commit reads only its _rev
            await self._rows_of(state, document, session)
            self.keep(state)
            return sparse_load.private(state)
        elif heavy(state):
            self.keep(state)
        return state

    async def _rows_of(self, state: Instance, document: dict[str, Any],
                       session: AsyncClientSession | None) -> None:
        """A loaded parent's rows: every one, or none yet on a sparse parent."""
        if sparse_load.loads_sparse(document, self.limits):
            sparse_load.make_sparse(state)
        else:
            await self.rows.attach(state, session)

    async def _up_front(self, state: Instance, seen: list[int | None],
                        session: AsyncClientSession | None) -> None:
        """The chunks a sparse parent's commit reads before planning (sparse.wanted)."""
        if sparse.is_sparse(state):
            await self.rows.hold(state, sparse_load.wanted(state, seen, self.limits), session)

    async def walkable(self, state: Instance, session: AsyncClientSession | None = None
                       ) -> Instance:
        """``state`` with every row, for a shell walk over them (a drain): a sparse
        parent reads every chunk into a copy, refused past ``Limits.sparse_chunks``."""
        if not sparse.is_sparse(state):
            return state
        copy = sparse_load.private(state)
        rows = sparse.rows_of(copy)
        sparse_load.check_bound(copy, set(range(rows.chunk_count())), self.limits)
        await self.rows.hold(copy, set(range(rows.chunk_count())), session)
        return copy

    def keep(self, state: Instance) -> None:
        if sparse_load.turns_sparse(state, self.limits):  # its next load is sparse
            self.kept.pop(state.id_, None)
            return
        if sparse.is_sparse(state):  # a few chunks only (sparse.KEPT_CHUNKS)
            state = sparse_load.kept_copy(state)
        self.kept[state.id_] = state
        self.kept.move_to_end(state.id_)
        while len(self.kept) > _KEPT_HEAVY:
            self.kept.popitem(last=False)

    def context(self, actor: Actor, now: datetime, reads: Reads) -> PlanContext:
        return PlanContext(
            now=now, actor=actor, dataset=self.dataset, documents=reads.documents,
            absent=reads.absent, query_results=reads.queries, limits=self.limits,
            new_key=self.new_key, new_token=ids.random_token,
            definitions=reads.definitions,
        )

    async def plan(
        self,
        plan: Callable[[PlanContext], Any],
        actor: Actor,
        session: AsyncClientSession | None,
        now: datetime,
        *,
        offload: bool | Runner = False,
        state: Instance | None = None,
    ) -> Any:
        """Plan at ``now``, satisfying the planner's lake reads as it asks.

        ``offload`` plans in a worker thread (a heavy instance), so the event loop
        keeps serving other requests meanwhile: ``True`` in the default executor, or a
        runner that chooses the thread (a caller's GROQ lane); the plan is pure either way.
        """
        reads = Reads()
        rounds = 0
        while rounds < IO_ROUNDS:  # (chunk reads are bounded by Limits.sparse_chunks)
            try:
                ctx = self.context(actor, now, reads)
                if callable(offload):
                    return await offload(lambda: plan(ctx))  # noqa: B023 - awaited here
                if offload:
                    return await asyncio.to_thread(plan, ctx)
                return plan(ctx)
            except NeedsChunks as need:  # rows of a sparse parent (core/cohort/sparse.py)
                if state is None or not sparse.is_sparse(state):
                    raise
                sparse_load.check_bound(state, need.chunks, self.limits)
                await self.rows.hold(state, set(need.chunks), session)
            except NeedsIO as need:
                rounds += 1
                await self._satisfy(need, reads, session, now)
        raise PlanReadLimit(f"a plan needed more than {IO_ROUNDS} rounds of lake reads",
                            rounds=IO_ROUNDS)

    async def _satisfy(self, need: NeedsIO, reads: Reads,
                       session: AsyncClientSession | None, now: datetime) -> None:
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
        elif isinstance(need, NeedsRowBatch):  # a registration batch (engine/registration.py)
            reads.queries[need.cache_key] = await batch_for(self, need, now, session is not None)
        elif isinstance(need, NeedsLakeQuery):
            reads.queries[need.cache_key] = await self.query(need.query, need.params, now)
        elif isinstance(need, NeedsKeyChunks):  # a spawn's identity check (sparse.py)
            reads.queries[need.cache_key] = await self.rows.key_chunks(
                need.parent_id, need.keys, session)
        elif isinstance(need, NeedsDefinition):
            if need.version is None:
                definition = await self.latest_definition(need.name, session)
            else:
                definition = await self.lake.get(
                    deploying.definition_id(need.name, need.version), dataset=self.dataset,
                    session=session)
            reads.definitions[(need.name, need.version)] = definition

    async def latest_definition(self, name: str, session: AsyncClientSession | None = None
                                ) -> dict[str, Any] | None:
        found = await self.lake.find(
            {"_type": deploying.DEFINITION_TYPE, "name": name}, dataset=self.dataset,
            session=session, sort=[("version", -1)], limit=1,
        )
        return found[0] if found else None

    async def query(self, query: str, params: dict[str, Any], now: datetime) -> Any:
        # push-down: a MongoDB prefilter, re-checked in memory. Outside the
        # commit's session on purpose: such reads are seeds (spawn rows,
        # query-sourced fields), not fenced state
        # bounded and off the event loop, like the API's groq field (docs/security.md)
        return await self.lake.groq(query, params=params, now=now,
                                    budget=self.limits.groq_budget(), dataset=self.dataset)

    async def write(self, mutation: Mutation, expected_rev: str | None,
                    session: AsyncClientSession, now: datetime) -> None:
        if mutation.creates:
            self.faults.check("before-spawn-commit")
        is_heavy = heavy(mutation.instance)
        if is_heavy:
            document = await asyncio.to_thread(mutation.instance.to_document)
        else:
            document = mutation.instance.to_document()
        observing.owed(document, mutation.before)  # traced: the trace a new owed stamp carries
        if mutation.insert:
            sizes.check_write(mutation, document, None)
            stored = await self.lake.create(document, dataset=self.dataset, session=session,
                                            now=now)
            self._stored(mutation.instance, stored)
        elif mutation.before is not None and expected_rev is not None:
            # targeted: only what changed (a cohort parent is never rewritten whole)
            update, filters = targeted_update(mutation, document)
            sizes.check_write(mutation, document, update)
            batched = BATCHED.get()  # a group's members: one statement (engine/group_writes.py)
            if update and batched is not None and not (is_heavy or mutation.instance.rowCount):
                batched.append((mutation, update, filters))
                update = {}
            if update:
                # Fenced by the transaction, not by the filter: the instance was read
                # in this transaction's snapshot, so a write committed since makes
                # this update a write conflict, and the whole callback re-runs. A
                # filter on _id alone is the lake's point lookup; {_id, _rev} makes
                # the embedded lake try every index first (1 ms more of its CPU per
                # commit, docs/performance.md).
                mutation.instance.rev_ = await self.lake.update(
                    mutation.instance.id_, update, dataset=self.dataset, session=session,
                    array_filters=filters or None, now=now)
                mutation.instance.updatedAt_ = iso(now)
                if is_heavy or mutation.instance.rowCount:
                    self.keep(mutation.instance)  # reused only if this commits (its _rev)
        else:
            sizes.check_write(mutation, document, None)
            stored = await self.lake.replace(document, expected_rev=expected_rev,
                                             dataset=self.dataset, session=session, now=now)
            self._stored(mutation.instance, stored)
        if mutation.rows:
            await self.rows.write(mutation.rows, session, now)
        if mutation.creates:
            batch = observing.stamp_children(mutation.creates[:self.limits.spawn_txn])
            try:
                await self.lake.create_many(batch, dataset=self.dataset, session=session,
                                            now=now)
            except DocumentExists as exc:
                raise child_taken(mutation.instance.id_, batch, exc) from exc
        if mutation.clears:
            # honoured stamps: the children observed, read in this transaction (one
            # that changed since gets a write conflict and the round re-runs with a
            # fresh read). By id, a page per statement: on the embedded lake one long
            # statement stalls every transaction (docs/performance.md)
            honoured = [child_id for child_id, _ in mutation.clears]
            for start in range(0, len(honoured), CLEARS_PER_STATEMENT):
                await self.lake.update_many(
                    {"_id": {"$in": honoured[start:start + CLEARS_PER_STATEMENT]}},
                    {"$unset": {"propagateTo": "", "propagateToken": "",
                                observing.PROPAGATE_TRACE: ""}},
                    dataset=self.dataset, session=session, now=now)

    @staticmethod
    def _stored(instance: Instance, stored: dict[str, Any]) -> None:
        instance.rev_ = stored["_rev"]
        instance.createdAt_ = stored.get("_createdAt")
        instance.updatedAt_ = stored.get("_updatedAt")
