"""Settlement against the embedded lake: per-attempt deadlines, automatic retries and
quorum completion (docs/subworkflows.md#settlement)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kinflow.core.context import iso, parse_iso
from kinflow.engine import Engine
from kinflow.worker import Worker
from tests.engine.conftest import Clock
from tests.engine.invariants import assert_repaired
from tests.engine.settle_defs import child, history, rows, settling, start

pytestmark = pytest.mark.lake


async def beat(engine: Engine, passes: int = 1) -> None:
    """Heartbeat passes (a drain's stamp that opens a gate owes a hop: the next pass)."""
    for _ in range(passes):
        report = await Worker(engine, grace_seconds=0).run_pass()
        assert not report.failed, report.failed


async def test_a_child_past_its_deadline_is_aborted_within_one_heartbeat(
        engine: Engine, clock: Clock) -> None:
    p = await start(engine, settling(childTimeoutSeconds=60), ["a", "b"])
    first = rows(p)
    assert first["a"].startedAt == iso(clock.now)
    assert first["a"].deadlineAt == iso(clock.now + timedelta(seconds=60))
    assert p.nextEvaluationAt == first["a"].deadlineAt  # the heartbeat's due index
    await engine.fire_action(first["b"].child_id, "task", "finish", params={"words": 1})
    clock.advance(seconds=59)
    await beat(engine)
    assert rows(await engine.get_instance(p.id_))["a"].resolved is None
    clock.advance(seconds=2)
    await beat(engine)
    after = await engine.get_instance(p.id_)
    row = rows(after)["a"]
    assert row.outcome == "timed-out" and row.resolved is not None and row.resolved.aborted
    assert rows(after)["b"].outcome == "succeeded"
    assert (await child(engine, row.child_id)).get("abortedAt")
    timed = history(after, "childTimedOut")
    assert len(timed) == 1 and timed[0]["rowKey"] == "a" and timed[0]["onTimeout"] == "abort"
    await beat(engine)
    assert (await engine.get_instance(p.id_)).currentStage == "next"  # the gate saw it end
    await assert_repaired(engine)


async def test_on_timeout_cancel_cancels_gracefully_and_reads_timed_out(
        engine: Engine, clock: Clock) -> None:
    p = await start(engine, settling(childTimeoutSeconds=30, onTimeout="cancel"), ["a"])
    clock.advance(seconds=31)
    await beat(engine)
    row = rows(await engine.get_instance(p.id_))["a"]
    assert row.outcome == "timed-out" and row.resolved is not None and row.resolved.cancelled
    assert (await child(engine, row.child_id)).get("cancelledAt")
    await beat(engine)
    await assert_repaired(engine)


async def test_a_failed_attempt_is_retried_after_its_backoff(
        engine: Engine, clock: Clock) -> None:
    retry = {"attempts": 3, "backoffSeconds": 10, "factor": 2}
    p = await start(engine, settling(retry=retry), ["a"])
    first_id = rows(p)["a"].child_id
    await engine.fire_action(first_id, "task", "give-up")
    waiting = await engine.get_instance(p.id_)
    row = rows(waiting)["a"]
    assert row.queued and row.attempt == 2 and row.previousChildIds == [first_id]
    assert row.child_id == f"{first_id}-a2" and row.outcome is None
    assert row.retryAt == iso(clock.now + timedelta(seconds=10))
    assert waiting.nextEvaluationAt == row.retryAt
    assert len(history(waiting, "subworkflowRetrying")) == 1
    clock.advance(seconds=10)
    await beat(engine)
    started = rows(await engine.get_instance(p.id_))["a"]
    assert not started.queued and started.retryAt is None
    assert started.startedAt == iso(clock.now)
    await engine.fire_action(started.child_id, "task", "give-up")
    second = rows(await engine.get_instance(p.id_))["a"]
    assert second.attempt == 3  # the backoff doubled: 10 x 2
    assert parse_iso(second.retryAt or "") == clock.now + timedelta(seconds=20)
    clock.advance(seconds=20)
    await beat(engine)
    third = rows(await engine.get_instance(p.id_))["a"]
    await engine.fire_action(third.child_id, "task", "give-up")
    last = rows(await engine.get_instance(p.id_))["a"]
    assert last.outcome == "failed" and last.attempt == 3 and not last.queued  # none left
    await assert_repaired(engine)


async def test_a_timed_out_attempt_is_retried_and_the_budget_waits_for_the_last(
        engine: Engine, clock: Clock) -> None:
    definition = settling(childTimeoutSeconds=30, retry={"attempts": 2},
                          failureBudget={"count": 0}, onBudgetExceeded="continue")
    p = await start(engine, definition, ["a"])
    first = rows(p)["a"]
    clock.advance(seconds=31)
    await beat(engine)
    again = await engine.get_instance(p.id_)
    row = rows(again)["a"]
    assert row.attempt == 2 and not row.queued and row.child_id == f"{first.child_id}-a2"
    assert row.startedAt == iso(clock.now)  # backoff 0: started in the stamp's commit
    assert history(again, "cohortFailed") == []  # a retry was left: not a failure yet
    await engine.fire_action(row.child_id, "task", "give-up")
    done = await engine.get_instance(p.id_)
    assert rows(done)["a"].outcome == "failed" and len(history(done, "cohortFailed")) == 1
    await assert_repaired(engine)


async def test_a_persons_abort_is_never_retried(engine: Engine, clock: Clock) -> None:
    p = await start(engine, settling(retry={"attempts": 3, "on": ["failed", "timed-out"]}),
                    ["a", "b"])
    await engine.abort_cohort(p.id_, "translate")
    after = await engine.get_instance(p.id_)
    assert all(r.outcome == "aborted" and r.attempt is None for r in after.subworkflows)
    await engine.abort_instance(p.id_)
    await assert_repaired(engine)


async def test_the_quorum_completes_the_cohort_once(engine: Engine, clock: Clock) -> None:
    definition = settling(completeWhen="$cohort.succeeded >= 2", maxActive=3)
    p = await start(engine, definition, ["a", "b", "c", "d", "e"])
    ids = {k: r.child_id for k, r in rows(p).items()}
    await engine.fire_action(ids["a"], "task", "finish", params={"words": 1})
    one = rows(await engine.get_instance(p.id_))
    assert not one["d"].queued and one["e"].queued  # a's end started d
    assert history(await engine.get_instance(p.id_), "cohortComplete") == []
    await engine.fire_action(ids["b"], "task", "finish", params={"words": 2})
    after = await engine.get_instance(p.id_)
    got = rows(after)
    assert [got[k].outcome for k in "ab"] == ["succeeded", "succeeded"]
    for key in "cde":  # c and d were live (aborted), e never started (skipped)
        assert got[key].outcome == "aborted" and got[key].abortReason == "cohort-complete"
    assert not (await engine.lake.find({"_id": f"{ids['e']}"}))
    own = next(c for c in after.cohorts or [] if c.activity == "translate")
    assert own.completedAt == iso(clock.now)
    assert len(history(after, "cohortComplete")) == 1
    await beat(engine)  # the drain's stamp owes the hop that sees nothing left
    assert (await engine.get_instance(p.id_)).currentStage == "next"
    await assert_repaired(engine)


async def test_a_complete_cohort_refuses_a_redrive(engine: Engine) -> None:
    definition = settling(completeWhen="$cohort.failed >= 1", onComplete="continue")
    definition["stages"][1]["transitions"][0]["when"] = "false"  # stay in the visit
    p = await start(engine, definition, ["a", "b"])
    ids = {k: r.child_id for k, r in rows(p).items()}
    await engine.fire_action(ids["a"], "task", "give-up")
    held = await engine.get_instance(p.id_)
    assert rows(held)["b"].resolved is None and rows(held)["b"].abortPending is None
    from kinflow.core.errors import RedriveNotAllowed
    with pytest.raises(RedriveNotAllowed) as refused:
        await engine.redrive_cohort(p.id_, "translate")
    assert refused.value.details["reason"] == "cohort-complete"
    await engine.fire_action(ids["b"], "task", "finish", params={"words": 2})
    assert len(history(await engine.get_instance(p.id_), "cohortComplete")) == 1
