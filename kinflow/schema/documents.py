"""``putDocuments``: many content documents in one call (docs/api.md#writing-many-documents).

The role and the checks of ``putDocument``, for each document of the list,
all before anything is written; then batched writes through the engine
(``Engine.put_documents``, engine/content_writes.py). The HTTP body limit
(``KINFLOW_MAX_REQUEST_BYTES``) bounds a call. Instances that read a written
document re-evaluate through the content reactions (the change stream), not
one tick per document in the call.
"""

from __future__ import annotations

import strawberry

from kinflow.schema import roles
from kinflow.schema.context import KInfo
from kinflow.schema.mutations import _content_dataset as content_dataset
from kinflow.schema.scalars import JSON


@strawberry.type(description="What putDocuments wrote: every document of the call.")
class PutDocumentsResult:
    count: int = strawberry.field(description="Documents written (created + replaced).")
    created: int = strawberry.field(description="Documents whose _id was new.")
    replaced: int = strawberry.field(description="Documents that replaced a stored one.")
    ids: list[strawberry.ID] = strawberry.field(
        description="The written documents' ids, in the order sent (generated ones included).")


@strawberry.type
class DocumentsMutation:
    @strawberry.mutation(description=(
        "Create or replace many content documents, each checked as putDocument checks one "
        "and all before anything is written; a refusal keeps putDocument's error code and "
        "names the document's index in details. An _id already stored is replaced; an _id "
        "twice in one call is refused. Written in batches of 1,000, each all or nothing."))
    async def put_documents(
        self, info: KInfo, documents: list[JSON], dataset: str | None = None
    ) -> PutDocumentsResult:
        actor = roles.require(info)
        target = await content_dataset(info, dataset, actor, create=True)
        report = await info.context.engine.put_documents(list(documents), dataset=target,
                                                         actor=actor)  # fmt: skip
        return PutDocumentsResult(count=report.count, created=report.created,
                                  replaced=report.replaced,
                                  ids=[strawberry.ID(i) for i in report.ids])  # fmt: skip
