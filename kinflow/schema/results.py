"""What the API's top-level fields return around instances: pages, results and events.

``InstanceConnection`` is a page of ``instances`` (its cursors are
``listing.py``'s); ``OperationResult`` is what every instance
mutation answers; ``InstanceEvent`` and ``ChildEvent`` are what the
subscriptions send.
"""

from __future__ import annotations

import strawberry

from kinflow.schema.instance_parts import PageInfo
from kinflow.schema.scalars import DateTime
from kinflow.schema.types import Subworkflow, WorkflowInstance


@strawberry.type
class InstanceConnection:
    nodes: list[WorkflowInstance]
    page_info: PageInfo
    total_count: int


@strawberry.type
class OperationResult:
    instance: WorkflowInstance
    changed: bool
    cascaded: int = strawberry.field(description="Stage moves made by the cascade.")
    next_evaluation_at: DateTime | None



@strawberry.type
class InstanceEvent:
    kind: str = strawberry.field(
        description='"snapshot" | "changed" | "completed" | "aborted" | "cancelling" | "cancelled"'
    )
    instance: WorkflowInstance
    at: DateTime


@strawberry.type
class ChildEvent:
    kind: str = strawberry.field(
        description='"snapshot" | "spawned" | "changed" | "completed" | "aborted" | "cancelled"'
    )
    parent_id: strawberry.ID
    row: Subworkflow
    at: DateTime
