"""The workflow engine: the shell over ``kinflow.core`` (commits, cascades, effects, reads).

Use ``Engine(lake)`` and its async verbs; pass an ``Actor`` for who is acting.
"""

from kinflow.core.context import Actor, Limits
from kinflow.core.state import Instance
from kinflow.engine.drain import DrainReport, EffectCall
from kinflow.engine.driving import OperationResult
from kinflow.engine.facade import Engine
from kinflow.engine.reads import DeployedDefinition, DeployOutcome

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
