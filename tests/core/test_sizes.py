"""The size arithmetic the planners use (the BSON measuring is the shell's)."""

from __future__ import annotations

from kinflow.core.sizes import ENGINE_CEILING, MONGODB_LIMIT, RESOLUTION_BYTES, engine_limit


def test_the_engine_ceiling_is_never_below_the_callers_limit() -> None:
    assert RESOLUTION_BYTES > 0 and ENGINE_CEILING < MONGODB_LIMIT
    assert engine_limit(12 * 1024 * 1024) == ENGINE_CEILING
    assert engine_limit(ENGINE_CEILING + 1) == ENGINE_CEILING + 1
