"""The ``Subscription`` root, fed by the change hub.

Every subscription registers with the hub before it reads its snapshot (the
hub fences the two so no change is lost or repeated), yields the current
state first, then one event per committed change that matters to it. A
subscriber that lags past its queue bound gets a ``subscription-lagged``
error and the stream ends: the client resubscribes and starts from a fresh
snapshot. Leaving the generator (client ``complete``, socket closed, server
shutdown) always unregisters from the hub.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import strawberry

from kinflow.core import readmodel
from kinflow.core.cohort.registry import Row, select
from kinflow.core.errors import InstanceNotFound
from kinflow.core.state import INSTANCE_TYPE
from kinflow.gdr import check_document_id, format_gdr
from kinflow.schema.admission import admission_of
from kinflow.schema.cohort_view import Cohort
from kinflow.schema.cohorts import check_activity, cohort_rows, cohort_signature, cohort_window
from kinflow.schema.context import KInfo
from kinflow.schema.errors import SubscriptionLagged
from kinflow.schema.family import Family
from kinflow.schema.hubs import family_topic, parent_topic
from kinflow.schema.loaders import Doc
from kinflow.schema.queries import instance_filter
from kinflow.schema.results import ChildEvent, InstanceEvent
from kinflow.schema.scalars import JSON, DateTime, jsonable
from kinflow.schema.types import (
    InstanceFilter,
    InstanceStatus,
    Subworkflow,
    WorkflowInstance,
    instance_status,
)
from kinflow.storage import ChangeEvent, doc_topic

Loader = Callable[[Any], Awaitable[Sequence[Doc]]]


@asynccontextmanager
async def _subscribed(
    info: KInfo, topic: str, snapshot: Loader, dataset: str | None = None
) -> AsyncIterator[AsyncIterator[ChangeEvent]]:
    """A hub subscription that raises ``SubscriptionLagged`` instead of yielding resync.

    It leases the dataset's hub for as long as it runs: the last subscription
    to leave a dataset closes that dataset's change stream. The snapshot is
    read through the process's snapshot gate and counted there until the
    subscriber asks for the event after it (kinflow/schema/snapshot_gate.py).
    """
    gate = info.context.services.snapshots
    held = 0

    async def gated(session: Any) -> Sequence[Doc]:
        nonlocal held
        documents = await gate.read(snapshot, session)
        held = len(documents)
        return documents

    def release() -> None:
        nonlocal held
        gate.release(held)
        held = 0

    async with info.context.services.hubs.lease(dataset) as hub:
        queue_size = info.context.settings.subscription_queue_size
        try:
            sub = await hub.subscribe(topic, gated, queue_size=queue_size)
        except BaseException:
            release()
            raise

        async def events() -> AsyncIterator[ChangeEvent]:
            async for event in sub:
                if event.kind == "resync":
                    raise SubscriptionLagged(
                        "this subscription fell too far behind and was ended; resubscribe to "
                        "get a fresh snapshot", resubscribe=True, topic=topic,
                    )  # fmt: skip
                yield event
                del event  # a snapshot's documents are held by no one once its frames went out
                release()  # asked for the next event: the snapshot's frame went out

        try:
            yield events()
        finally:
            sub.close()
            release()


def _at(doc: Doc) -> DateTime:
    return DateTime(str(doc.get("_updatedAt") or doc.get("lastChangedAt") or ""))


# an instance changes no more once here; a CANCELLING one still runs its cancel stage
TERMINAL = (InstanceStatus.COMPLETED, InstanceStatus.ABORTED, InstanceStatus.CANCELLED)


def _kind(before: InstanceStatus | None, after: InstanceStatus) -> str:
    if after is not before and after is not InstanceStatus.ACTIVE:
        return after.value
    return "changed"


# row statuses a child reaches once; queued and active are live
FINISHED = ("done", "aborted", "cancelled")


def _row_kind(row: Row, before: tuple[str, str | None] | None) -> str:
    if before is None:
        return "spawned"
    if row.status != before[0] and row.status in FINISHED:
        return "completed" if row.status == "done" else row.status  # aborted | cancelled
    return "changed"


def _child_event(kind: str, row: Row, at: str) -> ChildEvent:
    return ChildEvent(kind=kind, parent_id=strawberry.ID(row.parent_id), row=Subworkflow(row=row),
                      at=DateTime(at))  # fmt: skip


def _family_loader(info: KInfo, parent_id: str) -> Loader:
    lake, dataset = info.context.lake, info.context.dataset
    gdr = format_gdr(dataset, parent_id)

    async def load(session: Any) -> list[Doc]:
        parent = await lake.find({"_id": parent_id}, dataset=dataset, session=session)
        if parent:  # with its rows, from the same snapshot
            engine = await info.context.services.engine_over(dataset)
            parent = [await engine.assemble(parent[0], session)]
        children = await lake.find({"_type": INSTANCE_TYPE, **readmodel.descendants_filter(gdr)},
                                   dataset=dataset, session=session)  # fmt: skip
        return parent + children

    return load


@asynccontextmanager
async def _family(info: KInfo, parent_id: str) -> AsyncIterator[tuple[Family, AsyncIterator[
        set[str] | None]]]:
    """The family of ``parent_id``; iterate for the child ids each change touched.

    The first item is ``None`` (the snapshot was loaded); the stream ends when
    the parent is deleted.
    """
    family = Family(check_document_id(parent_id))
    async with _subscribed(info, family_topic(family.parent_id),
                           _family_loader(info, family.parent_id)) as events:  # fmt: skip

        async def touched() -> AsyncIterator[set[str] | None]:
            async for event in events:
                if event.kind == "snapshot":
                    family.load(event.documents)
                    del event  # the family keeps what it needs, not the snapshot
                    if family.parent is None or family.parent.get("_type") != INSTANCE_TYPE:
                        raise InstanceNotFound(f"no instance {parent_id!r}", instanceId=parent_id)
                    yield None
                    continue
                document = event.document
                if document is not None and document.get("_id") == family.parent_id:
                    engine = await info.context.services.engine_over(info.context.dataset)
                    document = await engine.assemble(dict(document))
                ids = family.apply(event.kind, event.document_id, document)
                if family.parent is None:
                    return
                yield ids

        yield family, touched()


def _instance_matcher(where: InstanceFilter | None, dataset: str) -> Callable[[Doc], bool]:
    """``instance_filter``'s conditions on a changed document (the read model's matcher)."""
    parent = format_gdr(dataset, where.parent_id) if where and where.parent_id else None
    root = format_gdr(dataset, where.root_id) if where and where.root_id else None

    def matches(doc: Doc) -> bool:
        if doc.get("_type") != INSTANCE_TYPE:
            return False
        if where is None:
            return True
        return readmodel.instance_matches(
            doc, definition=where.definition, stage=where.stage,
            status=where.status.value if where.status else None,
            roots_only=bool(where.roots_only), root=root, parent=parent,
        )  # fmt: skip

    return matches


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def instance_changed(
        self, info: KInfo, id: strawberry.ID
    ) -> AsyncGenerator[InstanceEvent, None]:
        instance_id = check_document_id(id)
        lake, dataset = info.context.lake, info.context.dataset

        async def load(session: Any) -> list[Doc]:
            return await lake.find({"_id": instance_id}, dataset=dataset, session=session)

        status: InstanceStatus | None = None
        async with _subscribed(info, doc_topic(instance_id), load) as events:
            async for event in events:
                if event.kind == "delete":
                    return
                doc = dict(event.document) if event.document is not None else None
                if event.kind == "snapshot" and (doc is None or doc.get("_type") != INSTANCE_TYPE):
                    raise InstanceNotFound(f"no instance {id!r}", instanceId=id)
                if doc is None or doc.get("_type") != INSTANCE_TYPE:
                    continue
                after = instance_status(doc)
                kind = "snapshot" if event.kind == "snapshot" else _kind(status, after)
                status = after
                yield InstanceEvent(kind=kind, instance=WorkflowInstance(doc=doc), at=_at(doc))
                if after in TERMINAL:
                    return  # its terminal event (or a finished snapshot) is its last

    @strawberry.subscription(
        description=(
            "Every status or stage change of any child of this parent "
            "(optionally one activity's cohort)."
        )
    )
    async def child_changed(
        self, info: KInfo, parent_id: strawberry.ID, activity: str | None = None
    ) -> AsyncGenerator[ChildEvent, None]:
        seen: dict[str, tuple[str, str | None]] = {}
        async with _family(info, parent_id) as (family, touched):
            async for ids in touched:
                if ids is None:
                    for row in select(family.rows(), activity=activity):
                        seen[row.child_id] = (row.status, row.stage)
                        yield _child_event("snapshot", row, family.changed_at(row.child_id))
                    continue
                for child_id in sorted(ids):
                    changed = family.row(child_id)
                    if changed is None or (activity is not None and changed.activity != activity):
                        continue
                    state = (changed.status, changed.stage)
                    before = seen.get(child_id)
                    if state == before:
                        continue
                    seen[child_id] = state
                    yield _child_event(_row_kind(changed, before), changed,
                                       family.changed_at(child_id))

    @strawberry.subscription(description="Only children reaching DONE, ABORTED or CANCELLED.")
    async def child_completed(
        self, info: KInfo, parent_id: strawberry.ID, activity: str | None = None
    ) -> AsyncGenerator[ChildEvent, None]:
        finished: set[str] = set()
        async with _family(info, parent_id) as (family, touched):
            async for ids in touched:
                if ids is None:
                    for row in select(family.rows(), activity=activity):
                        if row.status in FINISHED:
                            finished.add(row.child_id)
                            yield _child_event("snapshot", row, family.changed_at(row.child_id))
                    continue
                for child_id in sorted(ids):
                    done = family.row(child_id)
                    if done is None or done.status not in FINISHED or child_id in finished:
                        continue
                    if activity is not None and done.activity != activity:
                        continue
                    finished.add(child_id)
                    kind = "completed" if done.status == "done" else done.status
                    yield _child_event(kind, done, family.changed_at(child_id))

    @strawberry.subscription
    async def cohort_changed(
        self, info: KInfo, parent_id: strawberry.ID, activity: str
    ) -> AsyncGenerator[Cohort, None]:
        last: tuple[Any, ...] | None = None
        async with _family(info, parent_id) as (family, touched):
            async for ids in touched:
                if ids is None and family.parent is not None:
                    await check_activity(info.context.loaders, family.parent, activity,
                                         family.rows())  # fmt: skip
                rows = cohort_rows(family.rows(), activity)
                window = (cohort_window(family.parent, activity, rows)
                          if family.parent is not None else None)
                admitted = admission_of(family.parent, activity, rows[-1] if rows else None)
                signature = (*cohort_signature(rows), window, admitted)
                if signature == last:
                    continue
                last = signature
                yield Cohort.of(family.parent_id, activity, rows, window, family.parent)

    @strawberry.subscription
    async def instances_changed(
        self, info: KInfo, where: InstanceFilter | None = None
    ) -> AsyncGenerator[InstanceEvent, None]:
        lake, dataset = info.context.lake, info.context.dataset
        query = await instance_filter(info, where)
        limit = info.context.settings.subscription_snapshot_limit
        matches = _instance_matcher(where, dataset)
        topic = parent_topic(check_document_id(where.parent_id)) if (
            where and where.parent_id) else "*"

        async def load(session: Any) -> list[Doc]:
            if query is None:
                return []
            return await lake.find(query, dataset=dataset, session=session, sort=[("_id", 1)],
                                   limit=limit)  # fmt: skip

        members: dict[str, InstanceStatus] = {}
        async with _subscribed(info, topic, load) as events:
            async for event in events:
                if event.kind == "snapshot":
                    for doc in event.documents:
                        members[doc["_id"]] = instance_status(dict(doc))
                        yield InstanceEvent(kind="snapshot", instance=WorkflowInstance(
                            doc=dict(doc)), at=_at(dict(doc)))  # fmt: skip
                    # from here on only ``members``: a live subscription that kept its
                    # snapshot would hold a thousand documents each, outside the budget
                    del event
                    continue
                if event.kind == "delete" or event.document is None:
                    members.pop(str(event.document_id), None)
                    continue
                doc = dict(event.document)
                member = doc["_id"] in members
                if not matches(doc) and not member:
                    continue
                after = instance_status(doc)
                before = members.get(doc["_id"])
                kind = _kind(before, after)
                if matches(doc):
                    members[doc["_id"]] = after
                else:
                    members.pop(doc["_id"], None)
                if before is after and after in TERMINAL:
                    continue  # bookkeeping after its terminal event: no `changed` after it
                yield InstanceEvent(kind=kind, instance=WorkflowInstance(doc=doc), at=_at(doc))

    @strawberry.subscription
    async def document_changed(
        self, info: KInfo, id: strawberry.ID, dataset: str | None = None
    ) -> AsyncGenerator[JSON | None, None]:
        doc_id = check_document_id(id)
        lake = info.context.lake
        target = await info.context.services.datasets.require(dataset)  # never created here

        async def load(session: Any) -> list[Doc]:
            return await lake.find({"_id": doc_id}, dataset=target, session=session)

        async with _subscribed(info, doc_topic(doc_id), load, dataset=target) as events:
            async for event in events:
                if event.kind == "snapshot":
                    yield jsonable(event.documents[0]) if event.documents else None
                elif event.kind == "delete":
                    yield None
                elif event.document is not None:
                    yield jsonable(event.document)
