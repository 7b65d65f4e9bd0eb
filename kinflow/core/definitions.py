"""The runtime view of a stored definition document.

A deployed definition is stored with the lake's system fields and deploy's
own stamps (``version``, ``contentHash``, ``modelVersion``, ``deployedAt``);
the authored model is what is left. Starting an instance pins that view as
its snapshot, and every evaluation parses the snapshot back through here.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from kinflow.define.models import WorkflowDefinition

DEFINITION_TYPE = "kinflow.definition"
# what deploy adds to an authored definition (the lake's own fields start with "_")
DEPLOY_STAMPS = ("version", "contentHash", "modelVersion", "deployedAt")


def definition_id(name: str, version: int) -> str:
    """The stored document id of one deployed version."""
    return f"definition.{name}.v{version}"


def authored(document: Any) -> Any:
    """The authored part of a stored definition: no system fields, no deploy stamps."""
    if not isinstance(document, dict):
        return document
    return {k: v for k, v in document.items()
            if not k.startswith("_") and k not in DEPLOY_STAMPS}  # fmt: skip


def runtime_definition(document: Any) -> WorkflowDefinition:
    """The model of a stored definition document (or of an instance's snapshot)."""
    return WorkflowDefinition.model_validate(authored(document))


@lru_cache(maxsize=256)
def parse_snapshot(snapshot: str) -> WorkflowDefinition:
    """An instance's pinned definition, parsed once per distinct snapshot text."""
    return runtime_definition(json.loads(snapshot))
