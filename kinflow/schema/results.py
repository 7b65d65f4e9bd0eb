"""What the API's top-level fields return around instances: pages, results and events.

``InstanceConnection`` is a page of ``instances`` (its cursor is the last
document id, opaque to callers); ``OperationResult`` is what every instance
mutation answers; ``InstanceEvent`` and ``ChildEvent`` are what the
subscriptions send.
"""

from __future__ import annotations

import base64
import json

import strawberry

from kinflow.schema.instance_parts import PageInfo
from kinflow.schema.scalars import DateTime
from kinflow.schema.types import Subworkflow, WorkflowInstance


@strawberry.type
class InstanceConnection:
    nodes: list[WorkflowInstance]
    page_info: PageInfo
    total_count: int


def encode_cursor(doc_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": doc_id}).encode()).decode()


def decode_cursor(cursor: str) -> str | None:
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except ValueError:
        return None
    after = value.get("after") if isinstance(value, dict) else None
    return after if isinstance(after, str) else None


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
