"""Pure: the window of a cohort (core/cohort/window.py) planned by the commit planner."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core import verbs
from kinflow.core.cohort import window
from kinflow.core.cohort.chunks import replace_row
from kinflow.core.cohort.observe import Observation, live_rows
from kinflow.core.cohort.registry import count, registry_rows, subworkflow_rows
from kinflow.core.errors import CohortNotFound
from kinflow.core.operator_verbs import AbortInstance, UpdateCohort, plan_abort, plan_update_cohort
from kinflow.core.state import AbortPending, Instance
from kinflow.errors import InvalidInput
from tests.core.spawning import child, knowing, parent
from tests.core.support import start

ROWS = '["a", "b", "c", "d", "e"]'


def windowed(max_active: int, rows: str = ROWS) -> dict[str, Any]:
    raw = parent(rows)
    raw["stages"][0]["activities"][0]["actions"][0]["spawn"]["maxActive"] = max_active
    return raw


def spawned(max_active: int = 2, *, finishes: bool = False) -> tuple[Instance, Any]:
    c = knowing(child(finishes=finishes))
    p = start(windowed(max_active))
    mutation = verbs.plan_fire_action(p, verbs.FireAction("translate", "fan"), c)
    return mutation.instance, mutation


def statuses(p: Instance) -> list[str]:
    return [v["status"] for v in subworkflow_rows(p, p.open_entry())]


def test_a_spawn_creates_the_window_and_queues_the_rest_in_order() -> None:
    p, mutation = spawned(2)
    assert [r.rowKey for r in p.subworkflows] == list("abcde")
    assert statuses(p) == ["active", "active", "queued", "queued", "queued"]
    assert sorted(d["_id"] for d in mutation.creates) == sorted(
        r.child_id for r in p.subworkflows[:2])
    assert all(r.seed is not None and r.seed.fields == {"label": r.rowKey}
               for r in p.subworkflows[2:])
    assert [r.child_id for r in live_rows(p)] == [r.child_id for r in p.subworkflows[:2]]
    counts = count(registry_rows(p.to_json() | {"subworkflows": [
        r.to_json() for r in p.subworkflows]}))
    assert (counts.active, counts.queued, counts.settled) == (2, 3, False)


def test_a_finished_child_starts_the_next_queued_row_in_the_same_commit() -> None:
    p, _ = spawned(2)
    c = knowing(child())
    first = p.subworkflows[0].child_id
    mutation = verbs.plan_hop(p, c, [Observation(first, "done", "done")])
    after = mutation.instance
    assert statuses(after) == ["done", "active", "active", "queued", "queued"]
    assert [d["_id"] for d in mutation.creates] == [after.subworkflows[2].child_id]
    assert "subworkflowStarted" in [e["_type"] for e in mutation.history]
    assert after.subworkflows[2].child_id == p.subworkflows[2].child_id  # the id is kept


def test_children_that_finish_at_creation_let_the_whole_queue_run() -> None:
    p, mutation = spawned(1, finishes=True)
    assert statuses(p) == ["done"] * 5
    assert len(mutation.creates) == 5


def test_a_condemned_queued_row_is_resolved_without_a_child() -> None:
    p, _ = spawned(2)
    c = knowing(child())
    aborted = plan_abort(p, AbortInstance("stop"), c).instance
    assert statuses(aborted)[2:] == ["aborted"] * 3
    assert {r.resolved.detail for r in aborted.subworkflows[2:]  # type: ignore[union-attr]
            } == {window.SKIPPED}
    assert [r.child_id for r in aborted.subworkflows if r.abortPending and not r.resolved] \
        == [r.child_id for r in p.subworkflows[:2]]


def test_fill_never_starts_beyond_the_limit_and_skips_condemned_rows() -> None:
    p, _ = spawned(2)
    c = knowing(child())
    replace_row(p, 3, abortPending=AbortPending(at="2026-01-01T00:00:00Z", reason="x"))
    started: list[int] = []
    window.fill(p, p.definition_model(), c, lambda i: started.append(i) is None)
    assert started == []  # two live children: the window is full
    assert p.subworkflows[3].resolved is not None and p.subworkflows[3].queued is None
    replace_row(p, 0, resolved=p.subworkflows[3].resolved)
    window.fill(p, p.definition_model(), c, lambda i: started.append(i) is None)
    assert started == [2]


def test_update_cohort_raises_lowers_and_refuses() -> None:
    p, _ = spawned(1)
    c = knowing(child())
    raised = plan_update_cohort(p, UpdateCohort("translate", 3), c)
    assert statuses(raised.instance) == ["active"] * 3 + ["queued"] * 2
    assert len(raised.creates) == 2
    lowered = plan_update_cohort(raised.instance, UpdateCohort("translate", 1), c)
    assert statuses(lowered.instance) == ["active"] * 3 + ["queued"] * 2
    assert lowered.creates == []
    assert [(w.activity, w.maxActive) for w in lowered.instance.cohorts or []] == [
        ("translate", 1)]
    with pytest.raises(CohortNotFound) as refused:
        plan_update_cohort(p, UpdateCohort("other", 3), c)
    assert refused.value.details == {"parentId": p.id_, "activity": "other"}
    for bad in (0, -1, True):
        with pytest.raises(InvalidInput):
            plan_update_cohort(p, UpdateCohort("translate", bad), c)


def test_declared_max_reads_the_spawn_block() -> None:
    model = start(windowed(4)).definition_model()
    assert window.declared_max(model, "review", "translate", "fan") == 4
    assert window.declared_max(model, "review", "translate") == 4
    assert window.declared_max(model, "review", "nope") is None
    assert window.declared_max(start(parent()).definition_model(), "review", "translate") \
        is None


def test_a_round_is_worth_running_once_half_the_window_finished() -> None:
    """``refill_batch`` tells the propagator when a waiting window's next round is due."""
    p, _ = spawned(4)  # 5 rows: 4 active, 1 queued
    assert window.refill_batch(p, p.definition_model()) == 2
    p, _ = spawned(2)
    assert window.refill_batch(p, p.definition_model()) == 1
    c = knowing(child())
    done = [Observation(row.child_id, "done", "done") for row in p.subworkflows[:2]]
    p = verbs.plan_hop(p, c, done).instance  # two finish, two more start: one still queued
    assert window.refill_batch(p, p.definition_model()) == 1
    done = [Observation(row.child_id, "done", "done") for row in p.subworkflows[2:4]]
    p = verbs.plan_hop(p, c, done).instance  # the last one started: nothing waits
    assert statuses(p) == ["done", "done", "done", "done", "active"]
    assert window.refill_batch(p, p.definition_model()) is None
    unwindowed = verbs.plan_fire_action(start(parent(ROWS)), verbs.FireAction(
        "translate", "fan"), c).instance
    assert window.refill_batch(unwindowed, unwindowed.definition_model()) is None


def test_the_kept_occupancy_matches_one_counted_afresh_after_every_commit() -> None:
    """``occupancy`` updates its kept counts by the rows replaced since; they must equal
    counts taken from scratch, through starts, finishes, aborts and skips."""
    p, _ = spawned(2)
    c = knowing(child())

    def afresh(instance: Instance) -> window.Occupancy:
        copy = instance.model_copy()
        copy._derived = {}
        return window.occupancy(copy)

    for step in range(3):
        assert window.occupancy(p) == afresh(p)
        live = [row for row in p.subworkflows if row.resolved is None and not row.queued]
        p = verbs.plan_hop(p, c, [Observation(live[0].child_id, "done", "done")]).instance
        assert window.occupancy(p) == afresh(p), step
    aborted = plan_abort(p, AbortInstance("stop"), c).instance
    assert window.occupancy(aborted) == afresh(aborted)
    assert not window.occupancy(aborted).queued  # the last queued row was skipped
