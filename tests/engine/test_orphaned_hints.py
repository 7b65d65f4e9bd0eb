"""A child whose parent is gone stops naming it, and fenced writers see that it changed."""

from __future__ import annotations

import pytest

from kinflow.engine import Engine
from kinflow.errors import RevisionConflict
from kinflow.storage import Lake

from .conftest import Clock


async def test_clearing_hints_to_a_vanished_parent_gives_children_a_new_rev(
    engine: Engine, lake: Lake, clock: Clock
) -> None:
    loaded = await lake.create({"_id": "child", "_type": "kinflow.instance",
                                "propagateTo": "gone", "propagateToken": "t1"})  # fmt: skip
    await engine.maintenance.propagate_to("gone")
    await engine.maintenance.settle_propagation()
    after = await lake.get("child")
    assert after is not None and "propagateTo" not in after and "propagateToken" not in after
    assert after["_rev"] != loaded["_rev"]
    assert after["_updatedAt"].startswith(clock.now.strftime("%Y-%m-%dT%H:%M:%S"))
    with pytest.raises(RevisionConflict):  # a writer that loaded the child before misses
        await lake.update("child", {"$set": {"propagateTo": "gone"}},
                          expected_rev=loaded["_rev"])  # fmt: skip
