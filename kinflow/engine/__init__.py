"""The workflow engine: a pure core planned by verb, and a runner that commits it.

Use ``Engine(lake)`` and its async verbs; pass an ``Actor`` for who is acting.
"""

from kinflow.engine.context import Actor, Limits
from kinflow.engine.runner import (
    DeployedDefinition,
    DeployOutcome,
    DrainReport,
    EffectCall,
    Engine,
    OperationResult,
)
from kinflow.engine.state import Instance

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
