"""The repair invariants every crash-window test checks after one heartbeat pass."""

from __future__ import annotations

from collections import Counter

from kinflow.core.cohort import tallies
from kinflow.core.state import Instance, parse_instance
from kinflow.engine import Engine


async def all_instances(engine: Engine) -> dict[str, Instance]:
    docs = await engine.lake.find({"_type": "kinflow.instance"})
    return {str(d["_id"]): parse_instance(await engine.assemble(d)) for d in docs}


def assert_cancellations(instances: dict[str, Instance]) -> None:
    """No child live under a CANCELLED parent (but those ``onCancel: detach`` let go), and
    no cancelled row without a cancelled or aborted child."""
    for parent in instances.values():
        for row in parent.subworkflows:
            child = instances.get(row.child_id)
            if parent.cancelledAt is not None and not row.detached:
                assert row.resolved is not None, f"{parent.id_} CANCELLED, row {row.rowKey} live"
                assert child is None or child.terminal, \
                    f"{parent.id_} is CANCELLED, its child {row.child_id} is live"
            if row.resolved is not None and row.resolved.cancelled and child is not None:
                assert child.cancelledAt is not None or child.abortedAt is not None, \
                    f"row {row.rowKey} of {parent.id_} cancelled, its child is " \
                    f"{child.terminal_state}"


async def assert_repaired(engine: Engine) -> dict[str, Instance]:
    """No duplicate child per row identity, condemned rows resolved, terminal children
    stamped, and no instance whose gates would still move it."""
    instances = await all_instances(engine)
    for parent in instances.values():
        refs = Counter(row.child_id for row in parent.subworkflows)
        assert all(n == 1 for n in refs.values()), f"a child registered twice in {parent.id_}"
        live = Counter((row.stageEntry, row.activity, row.action, row.rowKey)
                       for row in parent.subworkflows if row.resolved is None)
        assert all(n == 1 for n in live.values()), f"two live children for one row: {live}"
        for row in parent.subworkflows:
            assert row.abortPending is None or row.resolved is not None, "condemned, unresolved"
            found = instances.get(row.child_id)
            if found is not None and found.terminal:
                assert row.resolved is not None, f"terminal child {row.child_id} unstamped"
                result = found.result.outcome if found.result is not None else "succeeded"
                result = "aborted" if found.abortedAt else result
                if row.abortReason == "timed-out" and result in ("aborted", "cancelled"):
                    result = "timed-out"  # a deadline ended it (core/cohort/deadlines.py)
                assert row.outcome == result, \
                    f"row of {row.child_id} stamped without its child's outcome"
            assert row.resolved is None or row.outcome is not None, "resolved, no outcome"
        if parent.subworkflows:  # the cohort summary pages and counts read (tallies)
            kept = {(e["activity"], e["stageEntry"]): e for e in parent.cohortRows or []}
            whole = {(e["activity"], e["stageEntry"]): e
                     for e in tallies.summarise(parent.subworkflows)}
            assert kept == whole, f"{parent.id_}'s cohort summary differs from its rows"
    for instance in instances.values():  # queued or skipped rows have no child: no count
        if instance.parentInstance:
            rows = {r.child_id for r in instances[instance.parentInstance].subworkflows}
            rows |= {old for r in instances[instance.parentInstance].subworkflows
                     for old in r.previousChildIds or ()}  # redriven rows' earlier attempts
            assert instance.id_ in rows, "a child with no row"
    assert_cancellations(instances)
    for instance in instances.values():
        assert instance.propagateTo is None, f"{instance.id_} still owes its parent a stamp"
        assert not instance.owesAborts and not instance.materialising
        assert not instance.owesCancels, f"{instance.id_} still owes cancel requests"
        if not instance.terminal:
            again = await engine.tick(instance.id_)
            assert not again.changed, f"{instance.id_} still had a move owed"
    return instances
