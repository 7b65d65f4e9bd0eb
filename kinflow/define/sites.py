"""Which variables each expression site binds.

This table is the single source of truth for two consumers: deploy
validation (a site that reads a variable it does not bind is refused) and the
engine's condition rendering (which binds exactly these variables). Keeping
the rules as data means a new site is one row here, not two code paths that
can drift apart.

Vendor-only variables (``$can``, ``$attributes``, ``$tag``) are not bound
anywhere, so reading them is always an unbound-variable problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Window = Literal["workflow", "stage", "activity"]

ALWAYS: frozenset[str] = frozenset(
    {
        "self",
        "fields",
        "parent",
        "ancestors",
        "stage",
        "now",
        "context",
        "effects",
        "effectStatus",
        "activities",
        "allActivitiesDone",
        "anyActivityFailed",
        "subworkflows",
        "cohort",
        "cohorts",
    }
)
CALLER: frozenset[str] = frozenset({"actor", "assigned", "params"})
RESERVED: frozenset[str] = ALWAYS | CALLER | {"row", "can", "attributes", "tag", "definition"}


@dataclass(frozen=True, slots=True)
class Site:
    """One kind of place an expression can appear."""

    name: str
    window: Window  # the widest $fields scope the site sees
    extra: frozenset[str] = frozenset()  # variables bound beyond ALWAYS
    predicates: bool = True  # whether author predicates are bound
    lake: bool = False  # whether `*` (a lake read) is allowed

    @property
    def bound(self) -> frozenset[str]:
        return ALWAYS | self.extra


CALLER_FREE = frozenset({"assigned"})  # `$assigned` reads as false at caller-free sites

TRANSITION_WHEN = Site("transition.when", "stage", CALLER_FREE)
ACTIVITY_FILTER = Site("activity.filter", "activity", CALLER_FREE)
TRIGGER_WHEN = Site("action.when", "activity", CALLER_FREE)
TRIGGER_FILTER = Site("action.filter (cascade-fired)", "activity", CALLER_FREE)
ACTION_FILTER = Site("action.filter", "activity", frozenset({"actor", "assigned"}))
REQUIREMENT = Site("activity.requirements", "activity", frozenset({"actor", "assigned"}))
FIELD_EDITABLE = Site("field.editable", "activity", frozenset({"actor", "assigned"}))
BINDINGS_CALLER = Site("effect.bindings", "activity", frozenset({"actor", "assigned", "params"}))
BINDINGS_CASCADE = Site("effect.bindings (cascade-fired)", "activity",
                        frozenset({"actor", "assigned"}))
WHERE_CALLER = Site("op.where", "activity", frozenset({"row", "params"}))
WHERE_CASCADE = Site("op.where (cascade-fired)", "activity", frozenset({"row"}))
SPAWN_FOR_EACH = Site("spawn.forEach", "workflow", frozenset(), lake=True)
SPAWN_WITH = Site("spawn.with", "activity", frozenset({"row", "actor", "assigned"}))
SPAWN_ROW = Site("spawn.priority / spawn.concurrencyKey", "activity", frozenset({"row"}))
COMPLETE_WHEN = Site("spawn.completeWhen", "activity", frozenset())
SPAWN_CONTEXT = Site("spawn.context", "activity", frozenset({"actor", "assigned"}))
PREDICATE = Site("predicates", "workflow", frozenset(), predicates=False)
INITIAL_QUERY = Site("initialValue.query", "workflow", frozenset(), lake=True)
