"""The leaves of an instance view: status enums, the list filter, small record types.

Plain GraphQL types with no resolvers of their own; ``kinflow.schema.types``
builds ``WorkflowInstance`` and its connection, cohort and event types from
them. Kept apart so the view module holds only types that compute fields.
"""

from __future__ import annotations

from enum import Enum

import strawberry

from kinflow.core import readmodel
from kinflow.schema.loaders import Doc
from kinflow.schema.scalars import JSON, DateTime


@strawberry.enum
class InstanceStatus(Enum):
    ACTIVE = "active"
    COMPLETED = "completed"
    ABORTED = "aborted"
    CANCELLING = "cancelling"  # cancelInstance asked; its cancel stage and children clean up
    CANCELLED = "cancelled"


@strawberry.enum
class ChildStatus(Enum):
    QUEUED = "queued"  # waiting in its cohort's window: no child document yet
    ACTIVE = "active"
    DONE = "done"
    ABORTED = "aborted"
    CANCELLED = "cancelled"  # the child ended its graceful cancellation


@strawberry.enum
class EditMode(Enum):
    SET = "set"
    APPEND = "append"
    UNSET = "unset"


@strawberry.enum
class EffectOutcome(Enum):
    DONE = "done"
    FAILED = "failed"


def instance_status(doc: Doc) -> InstanceStatus:
    """The read model's status of ``doc`` as the GraphQL enum."""
    return InstanceStatus(readmodel.instance_status(doc))


@strawberry.input
class InstanceFilter:
    definition: str | None = None
    status: InstanceStatus | None = None
    parent_id: strawberry.ID | None = strawberry.field(
        default=None, description="Direct children of this instance."
    )
    root_id: strawberry.ID | None = strawberry.field(
        default=None, description="Every descendant of this root."
    )
    stage: str | None = None
    roots_only: bool | None = strawberry.field(
        default=None, description="Only instances with no parent (what a person started)."
    )


@strawberry.type
class PageInfo:
    has_next_page: bool
    end_cursor: str | None


@strawberry.type
class ActivityState:
    name: str
    status: str
    started_at: DateTime | None
    completed_at: DateTime | None
    fired_actions: list[str]


@strawberry.type
class StageVisit:
    key: str
    name: str
    entered_at: DateTime
    exited_at: DateTime | None


@strawberry.type
class ActionVerdict:
    activity: str
    action: str
    enabled: bool
    reason: str | None
    params: JSON | None = strawberry.field(description="Declared params.")


@strawberry.type
class PendingEffect:
    key: str
    name: str
    params: JSON
    queued_at: DateTime
    claimed: bool


@strawberry.type
class HistoryEntry:
    type: str
    at: DateTime
    data: JSON
