"""The cohort summaries (core/cohort/tallies.py) and the page cursors and chunk queries
built on them: pure, no lake."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kinflow.core.cohort import chunks, outcomes, selection, tallies
from kinflow.core.cohort.registry import CohortCounts, api_row, count
from kinflow.core.state import ResolvedRow, SubworkflowEntry
from kinflow.errors import InvalidInput
from kinflow.schema import cohort_page

AT = "2026-11-30T00:00:00.000Z"


def row(i: int, state: str = "active", activity: str = "translate", visit: str = "v1"
        ) -> SubworkflowEntry:
    extra: dict[str, Any] = {}
    if state == "queued":
        extra["queued"] = True
    elif state in ("succeeded", "failed"):
        extra["resolved"] = ResolvedRow(at=AT, stage="done")
        extra["outcome"] = state
    elif state == "aborted":
        extra["resolved"] = ResolvedRow(at=AT, aborted=True)
        extra["outcome"] = "aborted"
    elif state == "stopped":  # skipped or aborted by the failure budget
        extra["resolved"] = ResolvedRow(at=AT, aborted=True, detail=outcomes.BUDGET_STOPPED)
        extra["outcome"] = "aborted"
        extra["abortReason"] = outcomes.BUDGET_STOPPED
    elif state == "stopped-cancel":  # cancelled by the failure budget (cancel-rest)
        extra["resolved"] = ResolvedRow(at=AT, cancelled=True)
        extra["outcome"] = "cancelled"
        extra["abortReason"] = outcomes.BUDGET_STOPPED
    return SubworkflowEntry.model_validate({
        "_key": f"k{i}", "activity": activity, "action": "fan-out", "definition": "c",
        "stageEntry": visit, "cohortStage": "review", "rowKey": f"r{i:04d}",
        "ref": {"id": f"lake:d:c-{i}"}, "spawnedAt": AT, **extra})


STATES = ["active", "queued", "succeeded", "failed", "aborted", "stopped", "stopped-cancel"]


def registry(n: int, seed: int = 1) -> list[SubworkflowEntry]:
    pick = random.Random(seed)
    return [row(i, pick.choice(STATES), activity="translate" if i % 7 else "review")
            for i in range(n)]


def test_chunk_sizes_agree() -> None:
    assert tallies.CHUNK == chunks.CHUNK


def test_a_summary_counts_status_outcome_pairs_the_row_range_and_their_chunks() -> None:
    found = tallies.summarise([row(0), row(1, "queued"), row(2, "failed"),
                                    row(3, "succeeded", activity="other"),
                                    row(4, "aborted"), row(5, "stopped"),
                                    *(row(i, "queued") for i in range(6, 40))],
                                   offset=64)
    assert found == [
        {"activity": "translate", "stageEntry": "v1", "first": 64, "last": 103,
         "counts": {"active:": 1, "queued:": 35, "done:failed": 1, "aborted:aborted": 1,
                    "aborted:aborted:budget": 1},
         "chunks": {"active:": [2], "queued:": [[2, 3]], "done:failed": [2],
                    "aborted:aborted": [2], "aborted:aborted:budget": [2]},
         "tallies": tallies.SCHEME},
        {"activity": "other", "stageEntry": "v1", "first": 67, "last": 67,
         "counts": {"done:succeeded": 1}, "chunks": {"done:succeeded": [2]},
         "tallies": tallies.SCHEME}]
    entry = found[0]
    assert tallies.candidate_chunks(entry, None, 64) == [2, 3]
    assert tallies.candidate_chunks(entry, ["done:failed"], 64) == [2]
    assert tallies.candidate_chunks(entry, ["queued:"], 96) == [3]
    assert tallies.candidate_chunks(entry, ["done:succeeded"], 0) == []


def test_counts_from_the_summary_equal_counting_every_row() -> None:
    every = registry(300)
    summary = tallies.summarise(every)
    entry = tallies.find(summary, "translate", "v1")
    mine = [api_row("p", r, "v1") for r in every if r.activity == "translate"]
    counts = tallies.counts(entry)
    assert counts == count(mine)
    assert counts.stopped > 0 and counts.aborted > counts.stopped
    assert counts.failed == sum(1 for r in mine if r.outcome in ("failed", "aborted")
                                and r.abort_reason != outcomes.BUDGET_STOPPED)
    assert tallies.count_where(entry, ["done"], ["failed"]) == sum(
        1 for r in mine if r.status == "done" and r.outcome == "failed")
    assert tallies.count_where(entry, None, ["aborted"]) == sum(
        1 for r in mine if r.outcome == "aborted")  # a filter on outcome sees both kinds
    assert tallies.counts(None) == CohortCounts(0, 0, 0, 0)


def test_rows_the_budget_stopped_count_as_aborted_not_failed() -> None:
    mine = [row(0, "failed"), row(1, "failed"), *(row(i, "stopped") for i in range(2, 6))]
    expected = CohortCounts(total=6, active=0, done=2, aborted=4, failed=2, stopped=4)
    assert count([api_row("p", r, "v1") for r in mine]) == expected
    assert tallies.counts(tallies.summarise(mine)[0]) == expected
    again = row(1, "failed").model_copy(update={"abortReason": outcomes.BUDGET_STOPPED})
    assert count([api_row("p", again, "v1")]).failed == 1  # it failed before its abort ran
    rest = [row(0, "failed"), row(1, "failed"), row(2, "stopped-cancel"), row(3, "stopped")]
    expected = CohortCounts(total=4, active=0, done=2, aborted=1, failed=2, cancelled=1,
                            stopped=2)
    assert count([api_row("p", r, "v1") for r in rest]) == expected  # cancel-rest
    assert tallies.counts(tallies.summarise(rest)[0]) == expected


def test_an_older_summary_is_counted_again_and_read_whole_while_ambiguous() -> None:
    mine = [row(0, "failed"), row(1, "failed"), *(row(i, "stopped") for i in range(2, 6))]
    older = [{**e, "counts": {tallies.split(k)[0] + ":" + (tallies.split(k)[1] or ""): v
                             for k, v in e["counts"].items()}}
             for e in tallies.summarise(mine)]
    for entry in older:
        del entry["tallies"]
        entry["chunks"] = {"done:failed": [0], "aborted:aborted": [0]}
    assert not cohort_page.indexable({"rowCount": 6, "cohortRows": older})
    assert tallies.updated(older, mine, mine, [0]) == tallies.summarise(mine)
    plain = [{k: v for k, v in e.items() if k != "tallies"}
             for e in tallies.summarise([row(0, "failed"), row(1, "queued")])]
    assert cohort_page.indexable({"rowCount": 2, "cohortRows": plain})


def test_an_update_by_difference_over_rewritten_chunks_equals_a_whole_recount() -> None:
    pick = random.Random(7)
    base = registry(300)
    summary = tallies.summarise(base)
    for _ in range(20):
        now = list(base)
        changed = pick.sample(range(len(now)), 12)
        for i in changed:
            now[i] = row(i, pick.choice(STATES), activity=now[i].activity)
        now += [row(len(now) + j, "queued") for j in range(pick.randrange(0, 40))]
        touched = sorted({i // chunks.CHUNK for i in changed} |
                         {i // chunks.CHUNK for i in range(len(base), len(now))})
        summary = tallies.updated(summary, base, now, touched)
        whole = {(e["activity"], e["stageEntry"]): e for e in tallies.summarise(now)}
        assert {(e["activity"], e["stageEntry"]): e for e in summary} == whole
        base = now


def test_without_a_stored_summary_the_update_counts_everything_once() -> None:
    every = registry(100)
    assert tallies.updated(None, every, every, [0]) == tallies.summarise(every)
    older = [{k: v for k, v in e.items() if k != "chunks"} for e in tallies.summarise(every)]
    assert tallies.updated(older, every, every, [0]) == tallies.summarise(every)
    assert not cohort_page.indexable({"rowCount": 100, "cohortRows": older})
    assert cohort_page.indexable({"rowCount": 100, "cohortRows": tallies.summarise(every)})
    assert not cohort_page.indexable({"rowCount": 100})
    assert cohort_page.indexable({})


def test_find_prefers_the_open_visit_else_the_last_that_spawned() -> None:
    summary = tallies.summarise([row(0, visit="v1"), row(1, visit="v2"),
                                      row(2, visit="v1")])
    assert tallies.find(summary, "translate", "v2")["stageEntry"] == "v2"  # type: ignore[index]
    assert tallies.find(summary, "translate", None)["stageEntry"] == "v1"  # type: ignore[index]
    assert tallies.find(summary, "edit", None) is None


def test_chunk_documents_carry_their_counts() -> None:
    doc = chunks.chunk_document("p", 2, [row(64), row(65, "failed")], [])
    assert doc["cohorts"] == [{"activity": "translate", "stageEntry": "v1", "first": 64,
                               "last": 65, "counts": {"active:": 1, "done:failed": 1}}]


def test_the_pairs_a_filter_can_match() -> None:
    entry = {"activity": "translate", "stageEntry": "v1", "first": 0, "last": 99,
             "counts": {"done:failed": 2, "done:succeeded": 3, "queued:": 4}}
    assert cohort_page.filter_tallies(entry, selection.CohortFilter(status=("done",))) == {
        "done:failed", "done:succeeded"}
    assert cohort_page.filter_tallies(entry, selection.CohortFilter(status=("done",),
                                                                    outcome=("failed",))) == {
        "done:failed"}
    none = selection.CohortFilter(outcome=("cancelled",))
    assert cohort_page.filter_tallies(entry, none) == set()
    assert cohort_page.filter_tallies(entry, selection.CohortFilter(row_keys=("a",))) is None
    assert cohort_page.filter_tallies(entry, None) is None


def test_cursors_round_trip_and_anything_else_is_refused() -> None:
    assert cohort_page.decode(cohort_page.encode("row", 99), "row") == 99
    assert cohort_page.decode(None, "row") is None
    for bad in ("nope", cohort_page.encode("at", 3), cohort_page.encode("row", -5),
                "eyJyb3ciOiB0cnVlfQ=="):  # {"row": true}
        with pytest.raises(InvalidInput) as refused:
            cohort_page.decode(bad, "row")
        assert refused.value.code == "invalid-input"
    with pytest.raises(InvalidInput):
        cohort_page.check_first(0)
    with pytest.raises(InvalidInput):
        cohort_page.check_first(cohort_page.MAX_FIRST + 1)
