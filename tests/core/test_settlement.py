"""core/cohort/deadlines.py, retry.py, quorum.py, settlement.py: the settlement rules, pure."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kinflow.core import verbs
from kinflow.core.cohort import counts, deadlines, outcomes, quorum, retry, settlement, tallies
from kinflow.core.cohort.chunks import replace_row
from kinflow.core.commit import Commit
from kinflow.core.context import iso
from kinflow.core.state import CohortWindow, Instance, ResolvedRow
from kinflow.define.models import RetryPolicy
from tests.core.spawning import child, knowing, parent
from tests.core.support import NOW, start


def spawned(spawn: dict[str, Any], rows: str = '["a", "b", "c", "d"]', **kw: Any
            ) -> Instance:
    raw = parent(rows)
    raw["stages"][0]["activities"][0]["actions"][0]["spawn"].update(spawn)
    c = knowing(child(), raw, **kw)
    instance = start(raw, c=c)
    return verbs.plan_fire_action(instance, verbs.FireAction("translate", "fan"), c).instance


def later(seconds: float) -> Any:
    return knowing(child(), now=NOW + timedelta(seconds=seconds))


def ended(instance: Instance, index: int, outcome: str, **changes: Any) -> Instance:
    """A commit's copy of ``instance`` in which row ``index`` was stamped ``outcome``."""
    replace_row(instance, index, outcome=outcome, **changes, resolved=ResolvedRow(
        at=iso(NOW), aborted=True if outcome == "aborted" else None))
    return instance


def test_the_commit_that_creates_a_child_stamps_its_start_and_deadline() -> None:
    p = spawned({"childTimeoutSeconds": 60, "maxActive": 2})
    started = [r for r in p.subworkflows if not r.queued]
    assert [r.startedAt for r in started] == [iso(NOW)] * 2
    assert [r.deadlineAt for r in started] == [iso(NOW + timedelta(seconds=60))] * 2
    assert all(r.startedAt is None and r.deadlineAt is None for r in p.subworkflows[2:])
    assert p.nextEvaluationAt == iso(NOW + timedelta(seconds=60))  # the heartbeat's due index


def test_without_settlement_keys_no_row_is_stamped() -> None:
    p = spawned({})
    assert all(r.startedAt is None for r in p.subworkflows)
    assert not deadlines.settles(p.definition_model())


def test_a_live_row_past_its_deadline_is_condemned_once() -> None:
    p = spawned({"childTimeoutSeconds": 60}, '["a"]')
    hop = verbs.plan_hop(p, later(59)).instance
    assert hop.subworkflows[0].abortPending is None
    late = verbs.plan_hop(p, later(60)).instance
    row = late.subworkflows[0]
    assert row.abortPending is not None and row.abortReason == deadlines.TIMED_OUT
    assert late.owesAborts
    timed = [h for h in late.history if h["_type"] == "childTimedOut"]
    assert len(timed) == 1 and timed[0]["onTimeout"] == "abort"
    again = verbs.plan_hop(late, later(90)).instance
    assert len([h for h in again.history if h["_type"] == "childTimedOut"]) == 1


def test_on_timeout_cancel_owes_a_cancel_request() -> None:
    p = spawned({"childTimeoutSeconds": 5, "onTimeout": "cancel"}, '["a"]')
    row = verbs.plan_hop(p, later(5)).instance.subworkflows[0]
    assert row.cancelPending is not None and row.abortPending is None
    assert row.abortReason == deadlines.TIMED_OUT


def test_an_end_caused_by_the_deadline_reads_timed_out_and_counts_as_failed() -> None:
    p = spawned({"childTimeoutSeconds": 5}, '["a", "b"]')
    ended(p, 0, "aborted", abortReason=deadlines.TIMED_OUT)
    ended(p, 1, "succeeded", abortReason=deadlines.TIMED_OUT)  # it finished first
    deadlines.conclude(p, [0, 1])
    assert [r.outcome for r in p.subworkflows] == ["timed-out", "succeeded"]
    assert outcomes.counts_as_failed("timed-out", "timed-out")
    assert tallies.failed(tallies.summarise(p.subworkflows)[0]) == 1


def test_backoff_grows_by_the_factor_up_to_the_cap() -> None:
    policy = RetryPolicy(attempts=5, backoffSeconds=10, factor=3, maxBackoffSeconds=60)
    assert [retry.backoff(policy, n) for n in (1, 2, 3, 4)] == [10, 30, 60, 60]
    assert retry.backoff(RetryPolicy(attempts=2), 1) == 0


def test_a_failed_attempt_with_attempts_left_is_requeued_with_its_retry_time() -> None:
    p = spawned({"retry": {"attempts": 2, "backoffSeconds": 30}}, '["a", "b"]')
    first = p.subworkflows[0].child_id
    commit = Commit(p, later(0))
    ended(commit.m, 0, "failed")
    done = commit.settle_rows()
    assert done.retried == 1
    row = commit.m.subworkflows[0]
    assert row.queued and row.attempt == 2 and row.previousChildIds == [first]
    assert row.child_id == f"{first}-a2" and row.outcome is None and row.resolved is None
    assert row.retryAt == iso(NOW + timedelta(seconds=30))
    assert tallies.tally(row) == "queued::retrying"
    assert outcomes.counts_as_failed(row.outcome, row.abortReason) is False
    # the second attempt's failure is the last: it stays failed
    mutation = commit.finish()
    again = Commit(mutation.instance, later(40))
    again.m.subworkflows[0] = again.m.subworkflows[0].model_copy(update={
        "queued": None, "observed": p.subworkflows[1].observed, "retryAt": None})
    ended(again.m, 0, "failed")
    assert again.settle_rows().retried == 0 and again.m.subworkflows[0].outcome == "failed"


def test_aborts_and_exhausted_rows_are_never_retried() -> None:
    policy = RetryPolicy(attempts=3, on=["failed", "timed-out"])
    p = spawned({}, '["a"]')
    aborted = ended(p, 0, "aborted").subworkflows[0]
    assert not retry.retries(policy, aborted)  # a person's (or the parent's) abort
    assert retry.retries(policy, aborted.model_copy(update={"outcome": "timed-out"}))
    assert not retry.retries(policy, aborted.model_copy(update={"outcome": "failed",
                                                                  "attempt": 3}))
    only_failed = RetryPolicy(attempts=3, on=["failed"])
    assert not retry.retries(only_failed, aborted.model_copy(update={"outcome": "timed-out"}))


def test_due_is_the_earliest_future_deadline_or_retry_and_skips_paused_cohorts() -> None:
    p = spawned({"childTimeoutSeconds": 100, "maxActive": 1}, '["a", "b"]')
    replace_row(p, 1, retryAt=iso(NOW + timedelta(seconds=40)))
    assert deadlines.due(p, NOW) == NOW + timedelta(seconds=40)
    assert deadlines.due(p, NOW + timedelta(seconds=50)) == NOW + timedelta(seconds=100)
    row = p.subworkflows[1]
    p.cohorts = [CohortWindow(activity=row.activity, stageEntry=row.stageEntry,
                              pausedAt=iso(NOW))]
    assert deadlines.due(p, NOW) == NOW + timedelta(seconds=100)


def test_the_quorum_skips_rows_not_started_and_condemns_live_ones_once() -> None:
    p = spawned({"completeWhen": "$cohort.succeeded >= 1", "maxActive": 2})
    commit = Commit(p, later(0))
    ended(commit.m, 0, "succeeded")
    assert commit.settle_rows().completed == 1
    rows = commit.m.subworkflows
    assert rows[1].abortPending is not None and rows[1].abortReason == quorum.REASON
    assert [(r.outcome, r.abortReason) for r in rows[2:]] == [("aborted", quorum.REASON)] * 2
    own = quorum.setting(commit.m, (rows[0].activity, rows[0].stageEntry))
    assert own is not None and own.completedAt == iso(NOW)
    assert [h["_type"] for h in commit.m.history].count("cohortComplete") == 1
    summary = tallies.summarise(rows)[0]
    assert tallies.failed(summary) == 0  # what the quorum did is not a failure
    assert commit.settle_rows().completed == 0  # once


def test_on_complete_continue_leaves_live_children_and_a_false_condition_nothing() -> None:
    p = spawned({"completeWhen": "$cohort.failed > 0", "onComplete": "continue"})
    commit = Commit(p, later(0))
    ended(commit.m, 0, "succeeded")
    assert commit.settle_rows().completed == 0
    ended(commit.m, 1, "failed")
    assert commit.settle_rows().completed == 1
    assert all(r.abortPending is None for r in commit.m.subworkflows)


def test_the_cohort_object_counts_retrying_timed_out_and_completion() -> None:
    p = spawned({}, '["a", "b", "c"]')
    ended(p, 0, "aborted", abortReason=deadlines.TIMED_OUT)
    deadlines.conclude(p, [0])
    replace_row(p, 1, queued=True, retryAt=iso(NOW))
    entry = tallies.summarise(p.subworkflows)[0]
    value = counts.of_entry(entry, None)
    assert value["timedOut"] == 1 and value["failed"] == 1 and value["retrying"] == 1
    assert value["queued"] == 1 and value["complete"] is False and value["settled"] is False
    assert settlement.apply(p, p.definition_model(), later(0), []) == settlement.Settled()


def test_a_row_skipped_while_waiting_for_its_retry_no_longer_has_a_retry_time() -> None:
    from kinflow.core.cohort import window

    p = spawned({"retry": {"attempts": 2, "backoffSeconds": 60}}, '["a"]')
    commit = Commit(p, later(0))
    ended(commit.m, 0, "failed")
    commit.settle_rows()
    assert commit.m.subworkflows[0].retryAt is not None
    window.skip(commit.m, commit.ctx, 0, detail=window.SKIPPED)  # e.g. a closing abort
    commit.settle_rows()
    row = commit.m.subworkflows[0]
    assert row.resolved is not None and row.retryAt is None
    assert tallies.tally(row) == "aborted:aborted"


def test_on_complete_cancel_owes_live_children_a_cancel_request() -> None:
    p = spawned({"completeWhen": "$cohort.done >= 1", "onComplete": "cancel", "maxActive": 3})
    commit = Commit(p, later(0))
    ended(commit.m, 0, "succeeded")
    assert commit.settle_rows().completed == 1
    rows = commit.m.subworkflows
    assert all(r.cancelPending is not None and r.abortPending is None for r in rows[1:3])
    assert {r.abortReason for r in rows[1:]} == {quorum.REASON}
    assert rows[3].outcome == "aborted" and rows[3].resolved is not None  # never started
