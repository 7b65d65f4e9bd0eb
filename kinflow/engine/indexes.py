"""The indexes the engine's queries need, declared on every dataset it uses."""

from __future__ import annotations

from kinflow.core.deploy import DEFINITION_TYPE
from kinflow.core.state import INSTANCE_TYPE
from kinflow.storage.indexes import IndexSpec

INSTANCES = {"_type": INSTANCE_TYPE}

ENGINE_INDEXES: tuple[IndexSpec, ...] = (
    IndexSpec("definition_name_version", (("_type", 1), ("name", 1), ("version", -1)),
              partial={"_type": DEFINITION_TYPE}),
    IndexSpec("instance_watch", (("watch", 1),), partial=INSTANCES),
    IndexSpec("instance_due", (("nextEvaluationAt", 1),), partial=INSTANCES),
    IndexSpec("instance_parent", (("ancestors.id", 1),), partial=INSTANCES),
    IndexSpec("instance_definition", (("definition", 1), ("completedAt", 1)),
              partial=INSTANCES),
    # subworkflows: children by parent, and the repair hints the heartbeat follows
    IndexSpec("instance_children", (("parentInstance", 1), ("completedAt", 1)),
              partial=INSTANCES),
    IndexSpec("instance_propagate", (("propagateTo", 1),), partial=INSTANCES),
    IndexSpec("instance_owes_aborts", (("owesAborts", 1),), partial=INSTANCES),
    IndexSpec("instance_materialising", (("materialising", 1),), partial=INSTANCES),
    IndexSpec("instance_effects_due", (("effectsDueAt", 1),), partial=INSTANCES),
)
