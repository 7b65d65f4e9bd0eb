"""``purgeInstances``: an admin deletes finished families now (docs/retention.md).

The heartbeat purges families whose retention ran out; this mutation lets an
admin purge (or, by default, count with a dry run) the finished families
whose root finished before a moment, of one definition or given roots. The
same rules hold: whole families only, never one with a live member.
"""

from __future__ import annotations

import strawberry

from kinflow.core.retention import PurgeFilter as Selection
from kinflow.errors import InvalidInput
from kinflow.gdr import check_document_id
from kinflow.schema import roles
from kinflow.schema.context import KInfo
from kinflow.schema.scalars import DateTime
from kinflow.schema.types import WorkflowInstance
from kinflow.timestamps import iso, parse_iso

MAX_ROOT_IDS = 1000


@strawberry.input(description="Which finished families to purge: roots finished before a moment.")
class PurgeFilter:
    finished_before: DateTime = strawberry.field(
        description="Only roots that finished strictly before this moment.")
    definition: str | None = strawberry.field(default=None,
                                              description="Only roots of this definition.")
    root_ids: list[strawberry.ID] | None = strawberry.field(
        default=None, description="Only these roots (ids of children select nothing).")
    # a family goes only once its last member finished before finished_before too


@strawberry.type(description="What a purge removed, or what a dry run would remove.")
class PurgeResult:
    dry_run: bool
    roots: int = strawberry.field(description="Families purged (one root each).")
    instances: int = strawberry.field(description="Instances purged, roots included.")
    kept: int = strawberry.field(default=0, description=(
        "Selected families kept: a member is live or finished after finishedBefore."))
    held: int = strawberry.field(default=0, description="Selected families kept by a hold.")


def selection(where: PurgeFilter) -> Selection:
    """The engine's filter; the moment in the lake's own timestamp form (so it sorts)."""
    try:
        before = iso(parse_iso(str(where.finished_before)))
    except ValueError as exc:
        raise InvalidInput("finishedBefore must be an ISO-8601 timestamp",
                           argument="finishedBefore") from exc
    ids = None if where.root_ids is None else tuple(str(i) for i in where.root_ids)
    if ids is not None and len(ids) > MAX_ROOT_IDS:
        raise InvalidInput(f"at most {MAX_ROOT_IDS} rootIds per purge", argument="rootIds",
                           limit=MAX_ROOT_IDS)
    return Selection(finished_before=before, definition=where.definition, root_ids=ids)


@strawberry.type
class PurgeMutation:
    @strawberry.mutation(description=(
        "Purge the finished families the filter selects (admin). A dry run, the default, "
        "only counts them."))
    async def purge_instances(self, info: KInfo, where: PurgeFilter,
                              dry_run: bool | None = True) -> PurgeResult:
        roles.require(info)
        engine = info.context.engine
        counts = await engine.purge(selection(where),
                                    dry_run=dry_run is not False)  # null: a dry run too
        return PurgeResult(dry_run=counts.dry_run, roots=counts.roots,
                           instances=counts.instances, kept=counts.kept, held=counts.held)

    @strawberry.mutation(description=(
        "Keep a family (by its root) whatever its age: retention and purges pass it over "
        "until releaseFamily (admin)."))
    async def hold_family(self, info: KInfo, root_id: strawberry.ID,
                          reason: str) -> WorkflowInstance:  # fmt: skip
        actor = roles.require(info)
        if not reason.strip():
            raise InvalidInput("a hold needs a reason", argument="reason")
        root = await info.context.engine.hold_family(check_document_id(root_id),
                                                     reason[:500], actor.id)
        return WorkflowInstance(doc=root)

    @strawberry.mutation(description="Lift a family's hold; retention applies again (admin).")
    async def release_family(self, info: KInfo, root_id: strawberry.ID) -> WorkflowInstance:
        roles.require(info)
        engine = info.context.engine
        return WorkflowInstance(doc=await engine.release_family(check_document_id(root_id)))
