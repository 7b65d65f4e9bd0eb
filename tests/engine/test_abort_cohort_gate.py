"""An ``abortCohort`` with a filter that settles a cohort lets the parent's gate fire.

Found by the kill test: the batch commit condemns rows
without leaving the stage, and the abort drain's stamp ran no hop and left
none owed, so a parent whose last live rows were aborted sat in the stage with
its settled gate true until something else touched it. The stamp now owes the
hop (``nextEvaluationAt``), which the heartbeat runs.
"""

from __future__ import annotations

import pytest

from kinflow.core.cohort.selection import CohortFilter
from kinflow.engine import Engine
from kinflow.worker import Worker
from tests.engine.cohort_defs import child, items, parent
from tests.engine.invariants import assert_repaired

pytestmark = pytest.mark.lake


async def test_aborting_the_last_live_rows_by_filter_moves_the_parent(engine: Engine) -> None:
    await engine.deploy([parent(), child()])
    p = (await engine.start_instance("p", fields=items("a0", "a1"))).instance
    p = (await engine.fire_action(p.id_, "go", "go")).instance
    first = {r.rowKey: r.child_id for r in p.subworkflows}
    await engine.fire_action(first["a0"], "task", "finish")
    aborted = await engine.abort_cohort(p.id_, "translate",
                                        where=CohortFilter(status=("active",)))
    assert (aborted.matched, aborted.applied) == (1, 1)
    await Worker(engine, grace_seconds=0).run_pass()
    moved = await engine.get_instance(p.id_)
    assert moved.currentStage == "next"
    assert {r.rowKey: r.outcome for r in moved.subworkflows} == {"a0": "succeeded",
                                                                 "a1": "aborted"}
    await assert_repaired(engine)
