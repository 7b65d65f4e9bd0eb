"""The ``Query`` root: definitions, instances, cohorts and read-only GROQ."""

from __future__ import annotations

from typing import Annotated, Any

import strawberry

from kinflow.core import readmodel
from kinflow.core.definitions import DEFINITION_TYPE
from kinflow.core.errors import DefinitionNotFound, InstanceNotFound
from kinflow.core.state import INSTANCE_TYPE
from kinflow.engine.registry_cache import registry_rows
from kinflow.errors import InvalidInput
from kinflow.gdr import check_document_id, format_gdr
from kinflow.schema import listing
from kinflow.schema.cohort_page import indexable, indexed, spawned
from kinflow.schema.cohort_view import Cohort
from kinflow.schema.cohorts import check_activity, cohort_rows, cohort_window
from kinflow.schema.context import KInfo
from kinflow.schema.disconnect import unless_disconnected
from kinflow.schema.evaluation import caller_key
from kinflow.schema.results import InstanceConnection
from kinflow.schema.scalars import JSON, jsonable
from kinflow.schema.types import (
    InstanceFilter,
    PageInfo,
    WorkflowDefinition,
    WorkflowInstance,
)


async def instance_filter(info: KInfo, where: InstanceFilter | None) -> dict[str, Any] | None:
    """The lake filter for ``where``; ``None`` when it can match nothing (unknown parent)."""
    if where is None:
        return {"_type": INSTANCE_TYPE}
    if where.roots_only and (where.parent_id is not None or where.root_id is not None):
        return None  # a root is nobody's child or descendant
    dataset = info.context.dataset
    root = format_gdr(dataset, check_document_id(where.root_id)) if (
        where.root_id is not None) else None  # fmt: skip
    parent: tuple[str, int] | None = None
    if where.parent_id is not None:
        found = await info.context.loaders.instance(check_document_id(where.parent_id))
        if found is None:
            return None
        parent = (format_gdr(dataset, found["_id"]), len(readmodel.ancestor_gdrs(found)))
    query = readmodel.instance_filter(
        definition=where.definition, stage=where.stage,
        status=where.status.value if where.status else None,
        roots_only=bool(where.roots_only), root=root, parent=parent,
    )  # fmt: skip
    return None if query is None else {"_type": INSTANCE_TYPE, **query}


@strawberry.type
class Query:
    @strawberry.field
    async def definitions(
        self, info: KInfo, name: str | None = None, all_versions: bool | None = False
    ) -> list[WorkflowDefinition]:
        query: dict[str, Any] = {"_type": DEFINITION_TYPE}
        if name is not None:
            query["name"] = name
        docs = await info.context.lake.find(query, dataset=info.context.dataset,
                                            sort=[("name", 1), ("version", -1)])  # fmt: skip
        seen: set[str] = set()
        out = []
        for doc in docs:
            if not all_versions and doc.get("name") in seen:
                continue
            seen.add(str(doc.get("name")))
            out.append(WorkflowDefinition(doc=doc))
        return out

    @strawberry.field
    async def definition(
        self, info: KInfo, name: str, version: int | None = None
    ) -> WorkflowDefinition | None:
        try:
            return WorkflowDefinition(doc=await info.context.engine.get_definition(name, version))
        except DefinitionNotFound:
            return None

    @strawberry.field
    async def instance(self, info: KInfo, id: strawberry.ID) -> WorkflowInstance | None:
        doc = await info.context.loaders.instance(check_document_id(id))
        return WorkflowInstance(doc=doc) if doc is not None else None

    @strawberry.field
    async def instances(
        self,
        info: KInfo,
        where: InstanceFilter | None = None,
        first: int | None = 50,
        after: str | None = None,
        newest_first: Annotated[bool | None, strawberry.argument(
            description="The most recently started first (startedAt, then id, descending), "
            "roots and children alike; otherwise ascending ids.",
        )] = False,
    ) -> InstanceConnection:
        limit = 50 if first is None else first
        ceiling = info.context.settings.max_page_size
        if limit < 0 or limit > ceiling:
            raise InvalidInput(f"first must be between 0 and {ceiling}", first=limit,
                               max=ceiling)  # fmt: skip
        query = await instance_filter(info, where)
        if query is None:
            return InstanceConnection(nodes=[], page_info=PageInfo(has_next_page=False,
                                      end_cursor=None), total_count=0)  # fmt: skip
        lake, dataset = info.context.lake, info.context.dataset
        total = await lake.count(query, dataset=dataset)
        order = listing.NEWEST_FIRST if newest_first else listing.BY_ID
        page_query = dict(query)
        if after is not None:
            narrowed = order.after(query, after)
            if narrowed is None:
                raise InvalidInput("after is not a cursor this API issued", after=after)
            page_query = narrowed
        docs = await lake.find(page_query, dataset=dataset, sort=order.sort,
                               limit=limit + 1) if limit else []  # fmt: skip
        page = docs[:limit]
        for doc in page:  # later fields of these nodes reuse what was just read
            info.context.loaders.documents.prime(doc["_id"], doc)
        return InstanceConnection(
            nodes=[WorkflowInstance(doc=d) for d in page],
            page_info=PageInfo(has_next_page=len(docs) > limit,
                               end_cursor=order.cursor(page[-1]) if page else None),
            total_count=total,
        )  # fmt: skip

    @strawberry.field(description="The cohort an activity's spawn produced, as seen by the parent.")
    async def cohort(
        self,
        info: KInfo,
        parent_id: strawberry.ID,
        activity: str,
        action: str | None = None,
        current_only: bool | None = True,
    ) -> Cohort:
        parent = await info.context.loaders.instance(check_document_id(parent_id))
        if parent is None:
            raise InstanceNotFound(f"no instance {parent_id!r}", instanceId=parent_id)
        engine = await info.context.services.engine_over(parent.get("dataset"))
        if action is None and current_only and indexable(parent):
            # counts from the parent's summary, rows read by page (schema/cohort_page.py)
            found = await indexed(engine.rows, engine.limits, parent, activity)
            if found is not None:
                source, last = found
                return Cohort.indexed(source, last, cohort_window(parent, activity, [last]))
            if not spawned(parent, activity):
                await check_activity(info.context.loaders, parent, activity, [])
                return Cohort.of(parent["_id"], activity, [], cohort_window(parent, activity, []))
        parent = await engine.assemble(parent)
        every = registry_rows(parent)
        await check_activity(info.context.loaders, parent, activity, every)
        rows = cohort_rows(every, activity, action, current_only)
        return Cohort.of(parent["_id"], activity, rows, cohort_window(parent, activity, rows))

    @strawberry.field(
        description="Read-only GROQ over a dataset. Parameters are bound, never spliced."
    )
    async def groq(
        self, info: KInfo, query: str, params: JSON | None = None, dataset: str | None = None
    ) -> JSON | None:
        if params is not None and not isinstance(params, dict):
            raise InvalidInput("params must be an object of parameter -> value")
        engine = await info.context.services.engine_over(dataset)
        # bounded, off the event loop, and cancelled if the client leaves (docs/security.md)
        work = engine.query(query, dict(params or {}), caller=caller_key(info.context.actor))
        return jsonable(await unless_disconnected(info.context.request, work))
