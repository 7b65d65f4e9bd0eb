"""Pure: admission of queued rows (core/cohort/admission.py): priority order, keyed
windows, the start rate, pause and resume, the retry check, ``onBudgetExceeded: pause``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kinflow.core import verbs
from kinflow.core.cohort import admission, budget, window
from kinflow.core.cohort.chunks import replace_row
from kinflow.core.cohort.observe import Observation
from kinflow.core.context import PlanContext, iso
from kinflow.core.errors import CohortNotFound
from kinflow.core.operator_verbs import (
    PauseCohort,
    ResumeCohort,
    UpdateCohort,
    plan_pause_cohort,
    plan_resume_cohort,
    plan_update_cohort,
)
from kinflow.core.state import Instance, ResolvedRow
from kinflow.define.models import StartRate
from kinflow.errors import InvalidInput
from tests.core.spawning import child, knowing, parent
from tests.core.support import NOW, history_types, start

ROWS = ('[{"_key": "a", "p": 1, "site": "s1"}, {"_key": "b", "p": 5, "site": "s1"}, '
        '{"_key": "c", "p": 5, "site": "s2"}, {"_key": "d", "site": "s1"}, '
        '{"_key": "e", "p": 9, "site": "s3"}]')


def prepared(spawn: dict[str, Any], now: Any = NOW) -> tuple[Instance, PlanContext]:
    raw = parent(ROWS)
    block = raw["stages"][0]["activities"][0]["actions"][0]["spawn"]
    block.update({"with": {"label": "$row._key"}, **spawn})
    c = knowing(child(), raw, now=now)
    return start(raw, c=c), c


def spawned(spawn: dict[str, Any], now: Any = NOW) -> tuple[Instance, PlanContext]:
    instance, c = prepared(spawn, now)
    return verbs.plan_fire_action(instance, verbs.FireAction("translate", "fan"), c).instance, c


def live(p: Instance) -> list[str]:
    return [r.rowKey for r in p.subworkflows if not r.queued and r.resolved is None]


def started_order(p: Instance) -> list[str]:
    by_ref = {r.ref.to_json()["id"]: r.rowKey for r in p.subworkflows}
    return [by_ref[e["instanceRef"]["id"]] for e in p.history
            if e["_type"] == "subworkflowStarted"]


def starter(p: Instance, started: list[int]) -> Any:
    def start_row(index: int) -> bool:
        started.append(index)
        replace_row(p, index, queued=None)
        return True
    return start_row


def finish(p: Instance, c: PlanContext, *keys: str) -> Instance:
    done = [Observation(r.child_id, "done", "done") for r in p.subworkflows if r.rowKey in keys]
    return verbs.plan_hop(p, c, done).instance


# ---- priority ----


def test_rows_get_their_priority_and_key_at_registration() -> None:
    p, _ = spawned({"maxActive": 2, "priority": "$row.p", "concurrencyKey": "$row.site",
                    "maxActivePerKey": 2})
    assert [(r.rowKey, r.priority, r.concurrencyKey) for r in p.subworkflows] == [
        ("a", 1.0, "s1"), ("b", 5.0, "s1"), ("c", 5.0, "s2"), ("d", 0.0, "s1"),
        ("e", 9.0, "s3")]


def test_the_spawn_starts_the_highest_priority_rows_ties_in_registration_order() -> None:
    p, c = spawned({"maxActive": 2, "priority": "$row.p"})
    assert live(p) == ["b", "e"] and started_order(p) == ["e", "b"]
    p = finish(p, c, "e")
    assert live(p) == ["b", "c"]  # c ties with b (5) and comes after it: it is next
    p = finish(p, c, "b", "c")
    assert live(p) == ["a", "d"] and started_order(p)[-2:] == ["a", "d"]


def test_without_priority_the_order_is_registration_order() -> None:
    p, _c = spawned({"maxActive": 2})
    assert live(p) == ["a", "b"]
    assert all(r.priority is None for r in p.subworkflows)


def test_a_priority_that_is_not_a_number_reads_zero_and_keys_become_text() -> None:
    class Renderer:
        def __init__(self, value: Any) -> None:
            self.answer = value

        def value(self, *_: Any, **__: Any) -> Any:
            return self.answer

    model = spawned({"maxActive": 1})[0].definition_model()
    spawn = admission.spawn_block(model, "review", "translate")
    assert spawn is not None
    keyed = spawn.model_copy(update={"priority": "x", "concurrencyKey": "y"})
    for given, priority, key in (("high", 0.0, "high"), (3, 3.0, "3"), (2.5, 2.5, "2.5"),
                                 (True, 0.0, "true"), (None, 0.0, None),
                                 (float("inf"), 0.0, None), ({"a": 1}, 0.0, None)):
        assert admission.row_values(Renderer(given), keyed, "translate", {}) == {
            "priority": priority, "concurrencyKey": key}
    assert admission.row_values(Renderer(1), spawn, "translate", {}) == {}


# ---- keyed windows ----


def test_a_full_key_is_passed_over_without_blocking_the_rest() -> None:
    p, c = spawned({"maxActive": 3, "concurrencyKey": "$row.site", "maxActivePerKey": 1})
    assert live(p) == ["a", "c", "e"]  # b and d wait behind a (s1); c and e still start
    p = finish(p, c, "c")
    assert live(p) == ["a", "e"]  # the only rows waiting are s1's: its key is full
    p = finish(p, c, "a")
    assert live(p) == ["b", "e"]


def test_per_key_counts_inside_max_active_and_with_priority() -> None:
    p, c = spawned({"maxActive": 2, "priority": "$row.p", "concurrencyKey": "$row.site",
                    "maxActivePerKey": 1})
    assert live(p) == ["b", "e"]  # e (9, s3), then b (5, s1); c (5, s2) waits for room
    p = finish(p, c, "b")
    assert live(p) == ["c", "e"]  # c (s2) before a (s1, priority 1)


def test_update_cohort_sets_max_active_per_key_in_the_commit_that_makes_it() -> None:
    p, c = spawned({"maxActive": 4, "concurrencyKey": "$row.site", "maxActivePerKey": 1})
    assert live(p) == ["a", "c", "e"]
    raised = plan_update_cohort(p, UpdateCohort("translate", max_active_per_key=3), c)
    assert live(raised.instance) == ["a", "b", "c", "e"]
    assert "cohortUpdated" in [e["_type"] for e in raised.history]
    with pytest.raises(InvalidInput) as refused:
        plan_update_cohort(spawned({"maxActive": 1})[0],
                           UpdateCohort("translate", max_active_per_key=2), c)
    assert refused.value.details["reason"] == "no-concurrency-key"
    for bad in (0, True, 1.5):
        with pytest.raises(InvalidInput):
            plan_update_cohort(p, UpdateCohort("translate", max_active_per_key=bad), c)  # type: ignore[arg-type]


# ---- the start rate ----


def test_the_rate_log_allows_count_starts_in_any_window() -> None:
    rate = StartRate(count=3, perSeconds=60)
    log = [[iso(NOW - timedelta(seconds=50)), 2], [iso(NOW - timedelta(seconds=10)), 1]]
    assert admission.allowance(log, rate, NOW) == 0
    assert admission.next_slot(log, rate, NOW) == NOW + timedelta(seconds=10)
    assert admission.allowance(log, rate, NOW + timedelta(seconds=10)) == 2
    assert admission.allowance([[iso(NOW - timedelta(seconds=60)), 3]], rate, NOW) == 3
    assert admission.next_slot([], rate, NOW) is None
    kept = admission.logged(log, rate, NOW + timedelta(seconds=20), 1)
    assert kept == [[iso(NOW - timedelta(seconds=10)), 1], [iso(NOW + timedelta(seconds=20)), 1]]


def test_the_rate_log_merges_its_oldest_entries_conservatively() -> None:
    log = [[iso(NOW + timedelta(seconds=i)), 1] for i in range(admission.MAX_LOG + 3)]
    kept = admission.logged(log, None, NOW + timedelta(seconds=100), 1)
    assert len(kept) == admission.MAX_LOG and sum(n for _, n in kept) == len(log) + 1
    assert kept[0][0] > log[0][0]  # merged into the newer time: counted for longer


def test_a_rated_cohort_starts_count_per_window_and_owes_a_tick_at_the_next_slot() -> None:
    p, _c = spawned({"startRate": {"count": 2, "perSeconds": 60}})
    assert live(p) == ["a", "b"]
    own = admission.setting(p, ("translate", p.subworkflows[0].stageEntry))
    assert own is not None and own.recentStarts == [[iso(NOW), 2]]
    assert p.nextEvaluationAt == iso(NOW + timedelta(seconds=60))
    early = knowing(child(), now=NOW + timedelta(seconds=59))
    assert live(verbs.plan_hop(p, early, []).instance) == ["a", "b"]
    due = knowing(child(), now=NOW + timedelta(seconds=60))
    later = verbs.plan_hop(p, due, []).instance
    assert live(later) == ["a", "b", "c", "d"]
    assert later.nextEvaluationAt == iso(NOW + timedelta(seconds=120))


def test_update_cohort_changes_the_rate_and_earlier_starts_still_count() -> None:
    p, c = spawned({"startRate": {"count": 2, "perSeconds": 60}})
    raised = plan_update_cohort(p, UpdateCohort("translate",
                                                start_rate={"count": 3, "perSeconds": 60}), c)
    assert live(raised.instance) == ["a", "b", "c"]  # the 2 earlier starts count
    for bad in ({"count": 0, "perSeconds": 1}, {"count": 1}, {"count": 1, "perSeconds": 0},
                [1], "fast", {"count": 1, "perSeconds": 1, "burst": 2}):
        with pytest.raises(InvalidInput) as refused:
            plan_update_cohort(p, UpdateCohort("translate", start_rate=bad), c)
        assert refused.value.details["field"] == "startRate"


# ---- pause and resume ----


def test_pause_holds_queued_rows_and_resume_starts_them() -> None:
    p, c = spawned({"maxActive": 2})
    paused = plan_pause_cohort(p, PauseCohort("translate", "search is down", "k1"), c)
    p = paused.instance
    cohort = ("translate", p.subworkflows[0].stageEntry)
    assert admission.paused(p, cohort) and "cohortPaused" in history_types(p)
    p = finish(p, c, "a")
    assert live(p) == ["b"]  # live children run on, nothing starts
    again = plan_pause_cohort(p, PauseCohort("translate", "other"), c).instance
    assert history_types(again).count("cohortPaused") == 1  # a no-op
    own = admission.setting(again, cohort)
    assert own is not None and own.pausedReason == "search is down"
    resumed = plan_resume_cohort(p, ResumeCohort("translate", "k2"), c).instance
    assert live(resumed) == ["b", "c"] and "cohortResumed" in history_types(resumed)
    own = admission.setting(resumed, cohort)
    assert own is not None and own.pausedAt is None and own.pausedReason is None
    noop = plan_resume_cohort(resumed, ResumeCohort("translate"), c).instance
    assert history_types(noop).count("cohortResumed") == 1


def test_a_window_change_while_paused_applies_on_resume() -> None:
    p, c = spawned({"maxActive": 1})
    p = plan_pause_cohort(p, PauseCohort("translate"), c).instance
    p = plan_update_cohort(p, UpdateCohort("translate", max_active=3), c).instance
    assert live(p) == ["a"]
    assert live(plan_resume_cohort(p, ResumeCohort("translate"), c).instance) == ["a", "b", "c"]


def test_a_spawn_into_a_paused_cohort_starts_nothing() -> None:
    fresh, c = prepared({"maxActive": 2})
    admission.update_setting(fresh, ("translate", fresh.stages[-1].key_), pausedAt=iso(NOW))
    m = verbs.plan_fire_action(fresh, verbs.FireAction("translate", "fan"), c)
    assert live(m.instance) == [] and m.creates == []
    assert all(r.queued for r in m.instance.subworkflows)


def test_pause_and_resume_refuse_an_activity_that_never_spawned_and_replay_keys() -> None:
    p, c = spawned({"maxActive": 2})
    for plan in (lambda: plan_pause_cohort(p, PauseCohort("other"), c),
                 lambda: plan_resume_cohort(p, ResumeCohort("other"), c)):
        with pytest.raises(CohortNotFound):
            plan()
    once = plan_pause_cohort(p, PauseCohort("translate", "x", "key"), c).instance
    replay = plan_pause_cohort(once, PauseCohort("translate", "x", "key"), c)
    assert replay.replay
    with pytest.raises(Exception) as reused:
        plan_resume_cohort(once, ResumeCohort("translate", "key"), c)
    assert getattr(reused.value, "code", None) == "contract-violation"


# ---- retries wait for their time ----


def test_a_queued_row_waits_for_its_retry_at() -> None:
    p, c = spawned({"maxActive": 3})
    replace_row(p, 0, outcome="failed", resolved=ResolvedRow(at=iso(NOW)))
    replace_row(p, 3, retryAt=iso(NOW + timedelta(seconds=30)))
    started: list[int] = []
    window.fill(p, p.definition_model(), c, starter(p, started))
    assert started == [4]  # d waits for its retryAt; e is the next eligible row
    later = knowing(child(), now=NOW + timedelta(seconds=30))
    replace_row(p, 1, outcome="failed", resolved=ResolvedRow(at=iso(NOW)))
    window.fill(p, p.definition_model(), later, starter(p, started))
    assert started == [4, 3]


def test_a_paused_cohort_admits_no_retry() -> None:
    p, c = spawned({"maxActive": 3})
    replace_row(p, 0, outcome="failed", resolved=ResolvedRow(at=iso(NOW)))
    replace_row(p, 3, retryAt=iso(NOW))
    admission.pause(p, c, ("translate", p.subworkflows[0].stageEntry), None)
    started: list[int] = []
    window.fill(p, p.definition_model(), c, starter(p, started))
    assert started == []


# ---- the failure budget pauses ----


def test_on_budget_exceeded_pause_pauses_instead_of_failing() -> None:
    p, c = spawned({"maxActive": 2, "failureBudget": {"count": 0},
                    "onBudgetExceeded": "pause"})
    replace_row(p, 0, outcome="failed", resolved=ResolvedRow(at=iso(NOW)))
    assert not budget.enforce(p, p.definition_model(), c)  # no hop owed: nothing failed
    cohort = ("translate", p.subworkflows[0].stageEntry)
    own = admission.setting(p, cohort)
    assert own is not None and own.pausedReason == admission.BUDGET_REASON
    assert own.budgetExceededAt is not None
    assert "cohortFailed" not in history_types(p)
    assert next(e for e in p.history if e["_type"] == "cohortPaused")["reason"] == \
        "failure-budget-exceeded"
    assert [bool(r.queued) for r in p.subworkflows] == [False, False, True, True, True]
    assert p.subworkflows[1].abortPending is None
    entry = p.open_entry()
    state = entry.activity("translate") if entry is not None else None
    assert state is not None and state.status != "failed"
    assert not budget.enforce(p, p.definition_model(), c)  # acts once
    assert history_types(p).count("cohortPaused") == 1


def test_the_kept_queue_order_follows_replaced_and_added_rows() -> None:
    p, _ = spawned({"maxActive": 1, "priority": "$row.p"})

    def expected() -> list[int]:
        rows = p.subworkflows
        waiting = [i for i, r in enumerate(rows) if r.queued and r.resolved is None]
        return sorted(waiting, key=lambda i: (-(rows[i].priority or 0.0), i))

    assert list(admission.order(p, [], True)) == expected()
    queued = next(r for r in p.subworkflows if r.queued)
    for n in range(40):  # more added rows than a one-by-one insert takes
        p.subworkflows.append(queued.model_copy(update={"rowKey": f"x{n}",
                                                       "priority": float(n % 7)}))
    assert list(admission.order(p, [], True)) == expected()
    first = next(iter(admission.order(p, [], True)))
    replace_row(p, first, queued=None)  # it started
    replace_row(p, 3, priority=99.0)  # a changed row is found by identity
    assert list(admission.order(p, [], True)) == expected()
    assert next(iter(admission.order(p, [], True))) == 3
    assert list(admission.order(p, [4, 2, 9], False)) == [2, 4, 9]
