"""Whose GROQ this is: the key an API caller's evaluations are queued under.

Every evaluation an API caller asks for (the ``groq`` field, a cohort ``where``
filter) runs in the callers' lane of ``kinflow.groq.pool``, at most
``KINFLOW_GROQ_CALLER_CONCURRENCY`` at a time per key. The key is the actor a token
names, so one token cannot take every thread, and never ``None``, which would put
the caller in the engine's own lane.
"""

from __future__ import annotations

from kinflow.core.context import Actor


def caller_key(actor: Actor) -> str:
    """The lane key of ``actor``'s evaluations."""
    return actor.key
