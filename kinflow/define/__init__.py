"""Workflow definitions as data: models, shorthand, helpers, loading, validation."""

from kinflow.define.expand import expand_definition
from kinflow.define.hashing import content_hash
from kinflow.define.helpers import (
    define_action,
    define_activity,
    define_field,
    define_stage,
    define_transition,
    define_workflow,
)
from kinflow.define.loading import load_definitions, parse_definitions
from kinflow.define.models import WorkflowDefinition
from kinflow.define.validate import Issue, check_definition

__all__ = [
    "Issue",
    "WorkflowDefinition",
    "check_definition",
    "content_hash",
    "define_action",
    "define_activity",
    "define_field",
    "define_stage",
    "define_transition",
    "define_workflow",
    "expand_definition",
    "load_definitions",
    "parse_definitions",
]
