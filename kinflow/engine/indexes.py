"""The indexes the engine's queries need, declared on every dataset it uses.

The heartbeat's hints (``nextEvaluationAt``, ``propagateTo``, ``owing``,
``effectsDueAt``) and the watch-set are indexed only on the instances that
carry them: every instance write maintains every index whose partial filter
it matches, and most instances owe nothing (a child fire
cost the embedded lake 13% less CPU with these partial filters than with one
entry per instance in each, docs/performance.md). Each filter is one the
queries imply (``$gt: ""`` for strings), since a planner
uses a partial index only for a query that implies its filter; ``$exists``
would not do on the embedded lake, whose planner does not reason about it.

Every index on the dataset costs every write, matched or not (the embedded
lake reads each one's catalogue entry per write): the four repair flags share
one index, ``instance_owing`` (core/owing.py).
"""

from __future__ import annotations

from kinflow.core.deploy import DEFINITION_TYPE
from kinflow.core.owing import FIELD as OWING
from kinflow.core.state import INSTANCE_TYPE
from kinflow.storage.indexes import IndexSpec

INSTANCES = {"_type": INSTANCE_TYPE}
# one index per repair flag, before they were folded into ``owing`` (core/owing.py)
RETIRED_FLAG_INDEXES = ("instance_owing_aborts", "instance_owes_aborts", "instance_owing_cancels",
                        "instance_materialising_now", "instance_materialising",
                        "instance_owing_bulk")


def _owing(name: str, field: str, filter_: object, replaces: str) -> IndexSpec:
    """A single-field index on the instances whose ``field`` matches ``filter_``."""
    return IndexSpec(name, ((field, 1),), partial={**INSTANCES, field: filter_},
                     replaces=(replaces,))


ENGINE_INDEXES: tuple[IndexSpec, ...] = (
    IndexSpec("definition_name_version", (("_type", 1), ("name", 1), ("version", -1)),
              partial={"_type": DEFINITION_TYPE}),
    _owing("instance_watching", "watch", {"$gt": ""}, "instance_watch"),
    _owing("instance_due_at", "nextEvaluationAt", {"$gt": ""}, "instance_due"),
    IndexSpec("instance_parent", (("ancestors.id", 1),), partial=INSTANCES),
    IndexSpec("instance_definition", (("definition", 1), ("completedAt", 1)),
              partial=INSTANCES),
    # open cohort parents for /metrics (observability/gauges.py): only parents with rows
    IndexSpec("instance_cohort_parents", (("completedAt", 1),),
              partial={**INSTANCES, "rowCount": {"$gt": 0}}),
    # subworkflows: children by parent, and the repair hints the heartbeat follows
    IndexSpec("instance_children", (("parentInstance", 1), ("completedAt", 1)),
              partial=INSTANCES),
    _owing("instance_propagating", "propagateTo", {"$gt": ""}, "instance_propagate"),
    _owing("instance_effects_due_at", "effectsDueAt", {"$gt": ""}, "instance_effects_due"),
    # materialising, owesBulk, owesAborts, owesCancels: one index for the four flags
    IndexSpec("instance_owing", ((OWING, 1),), partial={**INSTANCES, OWING: {"$gt": ""}},
              replaces=RETIRED_FLAG_INDEXES),
)
