"""The instance-size arithmetic the planners need (the measuring is the shell's).

``engine/sizes.py`` holds the write-size guard, which encodes BSON; these
constants and the engine's ceiling are plain numbers the core plans with
(a verb reserves ``RESOLUTION_BYTES`` per live row it leaves behind).
"""

from __future__ import annotations

MONGODB_LIMIT = 16 * 1024 * 1024
ENGINE_CEILING = 15 * 1024 * 1024
RESOLUTION_BYTES = 512


def engine_limit(instance_bytes: int) -> int:
    """The ceiling for the engine's own commits: never below the callers' limit."""
    return max(instance_bytes, ENGINE_CEILING)
