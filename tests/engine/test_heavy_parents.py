"""A cohort parent kept parsed between rounds is never planned from a stale copy."""

from __future__ import annotations

from kinflow.engine import Engine
from kinflow.storage import Lake
from tests.engine.cohort_defs import child, items, parent
from tests.engine.conftest import Clock

SIZE = 300  # rows + their spawned history: a heavy instance (kept between commits)


async def test_a_kept_parent_is_read_again_after_another_process_wrote_it(
        lake: Lake, clock: Clock) -> None:
    here, elsewhere = Engine(lake, clock=clock), Engine(lake, clock=clock)
    await here.ensure_ready()
    await here.deploy([child(), parent()])
    names = [f"row-{n:03d}" for n in range(SIZE)]
    started = await here.start_instance("p", fields=items(*names))
    parent_id = started.instance.id_
    spawned = await here.fire_action(parent_id, "go", "go")
    children = [row.child_id for row in spawned.instance.subworkflows]
    assert len(children) == SIZE

    await here.fire_action(children[0], "task", "finish")  # a round here keeps the parent
    await here.settle_propagation()
    assert parent_id in here._kept

    edited = ["row-000", "edited"]  # another process writes the parent meanwhile
    await elsewhere.edit_field(parent_id, "items", [{"name": n} for n in edited])

    await here.fire_action(children[1], "task", "finish")
    await here.settle_propagation()
    stored = await here.get_instance(parent_id)
    value = next(f.value for f in stored.fields if f.name == "items")
    assert [entry["name"] for entry in value] == edited  # not reverted by a stale copy
    resolved = {row.child_id for row in stored.subworkflows if row.resolved is not None}
    assert {children[0], children[1]} <= resolved
