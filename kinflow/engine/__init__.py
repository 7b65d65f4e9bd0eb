"""The workflow engine: a pure core planned by verb, and a runner that commits it.

Use ``Engine(lake)`` and its async verbs; pass an ``Actor`` for who is acting.
"""

from kinflow.core.context import Actor, Limits
from kinflow.core.state import Instance
from kinflow.engine.runner import (
    DeployedDefinition,
    DeployOutcome,
    DrainReport,
    EffectCall,
    Engine,
    OperationResult,
)

__all__ = [
    "Actor",
    "DeployOutcome",
    "DeployedDefinition",
    "DrainReport",
    "EffectCall",
    "Engine",
    "Instance",
    "Limits",
    "OperationResult",
]
