"""``$cohort`` counts and ``aggregate`` folding (core/cohort/counts.py, aggregates.py): pure."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core.cohort import aggregates, chunks, counts, outcomes, tallies
from kinflow.core.conditions import Renderer, subworkflows_for
from kinflow.core.context import Limits
from kinflow.core.errors import CohortTooLargeForRows
from kinflow.core.state import CohortWindow, Instance, ResolvedRow, SubworkflowEntry
from kinflow.define import sites
from kinflow.define.cohort_keys import parse_aggregate
from tests.core.support import ctx, definition, start

AT = "2026-11-30T00:00:00.000Z"


def row(i: int, state: str = "active", visit: str = "v1", outputs: Any = None,
        activity: str = "translate") -> SubworkflowEntry:
    extra: dict[str, Any] = {}
    finished = {"succeeded": ("succeeded", None, {}), "failed": ("failed", None, {}),
                "aborted": ("aborted", None, {"aborted": True}),
                "timed-out": ("timed-out", "timed-out", {"aborted": True}),
                "budget": ("aborted", outcomes.BUDGET_STOPPED, {"aborted": True}),
                "quorum": ("aborted", "cohort-complete", {"aborted": True}),
                "cancelled": ("cancelled", None, {"cancelled": True})}
    if state == "queued":
        extra["queued"] = True
    elif state == "retrying":
        extra.update(queued=True, retryAt=AT, attempt=2)
    elif state in finished:
        outcome, reason, resolved = finished[state]
        extra.update(outcome=outcome, abortReason=reason, outputs=outputs,
                     resolved=ResolvedRow(at=AT, stage="done", **resolved))
    return SubworkflowEntry.model_validate({
        "_key": f"k{i}", "activity": activity, "action": "fan", "definition": "c",
        "stageEntry": visit, "cohortStage": "review", "rowKey": f"r{i:04d}",
        "ref": {"id": f"lake:d:c-{i}"}, "spawnedAt": AT, **extra})


def test_counts_tell_every_kind_of_row_apart() -> None:
    states = ["active", "queued", "retrying", "succeeded", "succeeded", "failed", "aborted",
              "timed-out", "budget", "quorum", "cancelled"]
    entry = tallies.summarise([row(i, s) for i, s in enumerate(states)])[0]
    found = counts.of_entry(entry, None)
    assert found == {
        "total": 11, "registering": False, "active": 1, "queued": 2, "done": 3,
        "succeeded": 2, "failed": 3, "aborted": 4, "cancelled": 1, "timedOut": 1,
        "retrying": 1, "paused": False, "complete": False, "settled": False}


def test_settled_waits_for_registration_queued_and_retrying_rows() -> None:
    done = tallies.summarise([row(0, "succeeded"), row(1, "failed")])[0]
    assert counts.of_entry(done, None)["settled"] is True
    registering = CohortWindow(activity="translate", stageEntry="v1",
                               registration={"after": "x"})
    assert counts.of_entry(done, registering)["settled"] is False
    assert counts.of_entry(done, registering)["registering"] is True
    waiting = tallies.summarise([row(0, "succeeded"), row(1, "retrying")])[0]
    paused = CohortWindow(activity="translate", stageEntry="v1", pausedAt=AT,
                          completedAt=AT)
    flags = counts.of_entry(waiting, paused)
    assert (flags["settled"], flags["paused"], flags["complete"]) == (False, True, True)
    assert counts.of_entry(None, None)["settled"] is False  # nothing spawned yet


def test_a_scheme_two_summary_is_read_and_updated_as_is() -> None:
    rows = [row(0, "succeeded"), row(1, "budget"), row(2)]
    old = tallies.summarise(rows)
    for entry in old:
        entry["tallies"] = 2
    assert all(tallies.current(e) for e in old)
    rows2 = [*rows[:2], row(2, "failed")]
    kept = tallies.updated(old, rows, rows2, [0])
    assert kept[0]["counts"] == {"done:succeeded": 1, "aborted:aborted:budget": 1,
                                 "done:failed": 1}


def _parent(aggregate: dict[str, str] | None = None) -> Instance:
    spawn: dict[str, Any] = {"forEach": "[]", "definition": {"name": "c"}}
    if aggregate is not None:
        spawn["aggregate"] = aggregate
    raw = definition("p", [{"name": "review", "activities": [
        {"name": "translate", "actions": [{"name": "fan", "spawn": spawn}]},
        {"name": "other", "actions": [{"name": "fan", "spawn": dict(spawn)}]}],
        "transitions": [{"name": "to-done", "to": "done", "when": "false"}]},
        {"name": "done"}])
    return start(raw)


def _with_rows(instance: Instance, rows: list[SubworkflowEntry]) -> Instance:
    instance.subworkflows = rows
    instance.cohortRows = tallies.summarise(rows)
    instance.rowCount = len(rows)
    return instance


def test_cohort_object_follows_rows_a_plan_changed_before_the_summary_does() -> None:
    instance = _parent()
    visit = instance.open_entry()
    assert visit is not None
    _with_rows(instance, [row(i, "active", visit.key_) for i in range(3)])
    before = counts.cohort_object(instance, "translate", visit.key_)
    assert (before["active"], before["settled"]) == (3, False)
    for i in range(3):  # what a propagation round does: the summary is refreshed only later
        done = row(i, "succeeded", visit.key_)
        chunks.replace_row(instance, i, resolved=done.resolved, outcome=done.outcome)
    instance.subworkflows.append(row(3, "failed", visit.key_))  # a row this plan added
    after = counts.cohort_object(instance, "translate", visit.key_)
    assert (after["total"], after["succeeded"], after["failed"], after["settled"]) == (
        4, 3, 1, True)
    assert instance.cohortRows is not None and tallies.total(instance.cohortRows[0]) == 3


def test_cohort_binds_the_own_activity_null_in_a_transition_and_cohorts_by_name() -> None:
    instance = _parent()
    visit = instance.open_entry()
    assert visit is not None
    _with_rows(instance, [row(0, "succeeded", visit.key_),
                          row(1, "active", visit.key_, activity="other")])
    renderer = Renderer(instance, instance.definition_model(), ctx())
    assert renderer.value("$cohort.succeeded", sites.TRIGGER_WHEN, "translate") == 1
    assert renderer.value("$cohort", sites.TRANSITION_WHEN) is None
    assert renderer.value("$cohorts.other.active", sites.TRANSITION_WHEN) == 1
    assert renderer.check("$cohorts.translate.settled", sites.TRANSITION_WHEN).satisfied


def test_subworkflows_is_refused_on_a_large_cohort_and_cohort_still_works() -> None:
    instance = _parent()
    visit = instance.open_entry()
    assert visit is not None
    _with_rows(instance, [row(i, "active", visit.key_) for i in range(5)])
    small = ctx(limits=Limits(condition_rows=5))
    with pytest.raises(CohortTooLargeForRows) as refused:
        subworkflows_for(instance, small, "count($subworkflows) > 0")
    assert refused.value.code == "cohort-too-large-for-rows"
    assert refused.value.details["rows"] == 5 and refused.value.details["limit"] == 5
    renderer = Renderer(instance, instance.definition_model(), small)
    with pytest.raises(CohortTooLargeForRows):
        renderer.check("count($subworkflows) > 0", sites.TRANSITION_WHEN)
    assert renderer.value("$cohorts.translate.active", sites.TRANSITION_WHEN) == 5
    assert len(subworkflows_for(instance, ctx(limits=Limits(condition_rows=6)), "x")) == 5


# ---------------------------------------------------------------- aggregates


def _fold(spec_text: str, values: list[Any], removed: tuple[Any, ...] = ()) -> Any:
    spec = parse_aggregate("x", spec_text)
    state = aggregates.empty(spec)
    for value in values:
        brought = aggregates.contribution(spec, {"outputs": {"n": value}})
        if brought is not None:
            state = aggregates.fold(spec, state, brought, 1)
    for value in removed:
        brought = aggregates.contribution(spec, {"outputs": {"n": value}})
        if brought is not None:
            state = aggregates.fold(spec, state, brought, -1)
    return aggregates.value(spec, state)


def test_aggregates_over_no_rows_and_non_numbers() -> None:
    assert [_fold(f"{f}(outputs.n)", []) for f in ("sum", "min", "max", "avg")] == [
        0, None, None, None]
    assert _fold("count()", []) == 0
    assert _fold("sum(outputs.n)", [1, "2", None, True, 3.5]) == 4.5
    assert _fold("avg(outputs.n)", [1, "x", 4]) == 2.5
    assert _fold("count(outputs.n > 2)", [1, 3, 5, "9"]) == 2
    assert _fold("count()", [1, "a", None]) == 3


def test_removal_takes_a_rows_old_attempt_out_including_the_extreme() -> None:
    assert _fold("sum(outputs.n)", [5, 7], removed=(7,)) == 5
    assert _fold("avg(outputs.n)", [5, 7], removed=(5, 7)) is None
    assert _fold("min(outputs.n)", [5, 2, 9, 2], removed=(2,)) == 2
    assert _fold("min(outputs.n)", [5, 2, 9, 2], removed=(2, 2)) == 5
    assert _fold("max(outputs.n)", [5, 2, 9], removed=(9,)) == 5
    assert _fold("max(outputs.n)", [5], removed=(5,)) is None


def test_min_beyond_its_kept_values_reads_null_until_one_comes_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aggregates, "KEPT", 2)
    spec = parse_aggregate("low", "min(outputs.n)")
    state = aggregates.empty(spec)
    for value in (1, 2, 3, 4):
        state = aggregates.fold(spec, state, value, 1)
    assert aggregates.value(spec, state) == 1 and state["h"] == 3
    for value in (1, 2):
        state = aggregates.fold(spec, state, value, -1)
    assert aggregates.value(spec, state) is None  # 3 and 4 remain, neither was kept
    state = aggregates.fold(spec, state, 3, 1)
    assert aggregates.value(spec, state) == 3
    assert len(str(state)) < 200


def test_refresh_folds_finished_rows_and_a_requeue_takes_the_old_attempt_out() -> None:
    instance = _parent({"words": "sum(outputs.n)", "top": "max(outputs.n)",
                        "big": "count(outputs.n > 5)", "all": "count()"})
    visit = instance.open_entry()
    assert visit is not None
    definition_ = instance.definition_model()
    rows = [row(0, "succeeded", visit.key_, {"n": 4}), row(1, "active", visit.key_),
            row(2, "failed", visit.key_, {"n": 9})]
    _with_rows(instance, rows)
    aggregates.refresh(instance, definition_, [], [0], chunks.CHUNK)
    assert counts.cohort_object(instance, "translate", visit.key_)["aggregates"] == {
        "words": 13, "top": 9, "big": 1, "all": 2}
    base = list(instance.subworkflows)
    chunks.replace_row(instance, 1, resolved=ResolvedRow(at=AT, stage="done"),
                       outcome="succeeded", outputs={"n": 6})
    chunks.replace_row(instance, 2, resolved=None, outcome=None, outputs=None, queued=True)
    live = counts.cohort_object(instance, "translate", visit.key_)["aggregates"]
    assert live == {"words": 10, "top": 6, "big": 1, "all": 2}  # mid-commit, before refresh
    instance.cohortRows = tallies.updated(instance.cohortRows, base, instance.subworkflows, [0])
    aggregates.refresh(instance, definition_, base, [0], chunks.CHUNK)
    instance._derived.pop(chunks.REPLACED, None)
    assert counts.cohort_object(instance, "translate", visit.key_)["aggregates"] == live


def test_a_cohort_new_in_the_plan_reads_its_aggregates_before_the_commit_ends() -> None:
    instance = _parent({"words": "sum(outputs.n)"})
    visit = instance.open_entry()
    assert visit is not None
    instance.subworkflows = [row(0, "succeeded", visit.key_, {"n": 4}),
                             row(1, "succeeded", visit.key_, {"n": 5})]  # no summary yet
    assert counts.cohort_object(instance, "translate", visit.key_)["aggregates"] == {
        "words": 9}
    _with_rows(instance, instance.subworkflows[:1])
    aggregates.refresh(instance, instance.definition_model(), [], [0], chunks.CHUNK)
    instance.subworkflows.append(row(1, "succeeded", visit.key_, {"n": 5}, "other"))
    assert counts.cohort_object(instance, "other", visit.key_)["aggregates"] == {"words": 5}


def test_rows_a_plan_adds_count_toward_their_own_cohort_only() -> None:
    instance = _parent()
    visit = instance.open_entry()
    assert visit is not None
    _with_rows(instance, [row(i, "active", visit.key_) for i in range(4)])
    instance.subworkflows.extend(row(i, "queued", visit.key_, activity="other")
                                 for i in range(4, 8))
    assert counts.largest(instance) == ("translate", visit.key_, 4)
    assert len(subworkflows_for(instance, ctx(limits=Limits(condition_rows=5)), "x")) == 8
    instance.subworkflows.append(row(8, "queued", visit.key_, activity="other"))
    with pytest.raises(CohortTooLargeForRows):
        subworkflows_for(instance, ctx(limits=Limits(condition_rows=5)), "x")


def test_the_live_summary_spans_the_rows_the_plan_added() -> None:
    instance = _parent()
    visit = instance.open_entry()
    assert visit is not None
    _with_rows(instance, [row(i, "active", visit.key_) for i in range(2)])
    instance.subworkflows.extend([row(2, "queued", visit.key_, activity="other"),
                                  row(3, "queued", visit.key_)])
    found = {e["activity"]: (e["first"], e["last"], tallies.total(e))
             for e in counts.live_summary(instance)}
    assert found == {"translate": (0, 3, 3), "other": (2, 2, 1)}
