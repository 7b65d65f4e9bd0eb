"""The cohort filter and the bulk bookkeeping (core/cohort/selection.py), pure: no lake."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kinflow.core.cohort import selection
from kinflow.core.cohort.registry import Row
from kinflow.core.cohort.selection import CohortFilter
from kinflow.core.context import Actor, Limits, PlanContext
from kinflow.core.state import SubworkflowEntry
from kinflow.errors import InvalidInput
from kinflow.groq import Budget, GroqLimitExceeded, GroqSyntaxError

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def view(key: str, **changes: Any) -> dict[str, Any]:
    base = {"_id": f"instance.c{key}", "rowKey": key, "activity": "translate",
            "action": "fan-out", "definition": "c", "current": True, "status": "done",
            "stage": "done", "spawnedAt": "2026-01-01T00:00:00.000Z", "outcome": "succeeded",
            "outputs": {"wordCount": 10, "title": key}, "outputsError": None, "attempt": 1,
            "previousChildIds": []}
    return {**base, **changes}


ROWS = [
    view("a"),
    view("b", outcome="failed", stage="gave-up", outputs={"wordCount": 1500, "title": "b"}),
    view("c", status="aborted", outcome="aborted", stage="work", outputs=None),
    view("d", status="active", outcome=None, stage="work", outputs=None),
    view("e", status="queued", outcome=None, stage=None, outputs=None),
]


def selected(spec: CohortFilter) -> list[str]:
    tree = spec.check(Limits())
    return [r["rowKey"] for r in ROWS if spec.matches(r, tree, NOW)]


def test_no_field_selects_every_row() -> None:
    assert selected(CohortFilter()) == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize(("spec", "expected"), [
    (CohortFilter(status=("done",)), ["a", "b"]),
    (CohortFilter(status=("queued", "active")), ["d", "e"]),
    (CohortFilter(outcome=("failed", "aborted")), ["b", "c"]),
    (CohortFilter(row_keys=("a", "e", "zz")), ["a", "e"]),
    (CohortFilter(stage="work"), ["c", "d"]),
    (CohortFilter(where="outputs.wordCount > 1000"), ["b"]),
    (CohortFilter(where="outputs.title in ['a', 'c']"), ["a"]),  # c has no outputs
    (CohortFilter(where="attempt == 1 && !defined(outputs)"), ["c", "d", "e"]),
    (CohortFilter(status=("done",), outcome=("succeeded",), where="outputs.wordCount < 20"),
     ["a"]),
])
def test_every_field_narrows_and_all_of_them_must_match(spec: CohortFilter,
                                                         expected: list[str]) -> None:
    assert selected(spec) == expected


def test_a_where_that_is_not_a_boolean_or_fails_on_a_row_selects_nothing_there() -> None:
    assert selected(CohortFilter(where="outputs.wordCount")) == []
    assert selected(CohortFilter(where="outputs.wordCount + 'x' == 1")) == []
    # a quadratic where over a row is bounded like conditions: that row does not match
    wide = view("w", outputs={"list": list(range(2000))})
    spec = CohortFilter(where="count(outputs.list[count(^.outputs.list[@ >= 0]) > 0]) > 0")
    assert spec.matches(wide, spec.check(Limits()), NOW) is False


def test_a_bad_filter_is_refused_when_checked() -> None:
    with pytest.raises(GroqSyntaxError):
        CohortFilter(where="outputs.(").check(Limits())
    with pytest.raises(GroqSyntaxError):  # no parameters in a filter
        CohortFilter(where="outputs.wordCount > $min").check(Limits())
    with pytest.raises(GroqLimitExceeded):
        CohortFilter(where="true || " * 20 + "true").check(Limits(groq_max_length=50))
    with pytest.raises(InvalidInput):
        CohortFilter(status=("finished",)).check(Limits())
    with pytest.raises(InvalidInput):
        CohortFilter(where="  ").check(Limits())


def test_matches_row_reads_an_api_row_like_the_row_view() -> None:
    row = Row(parent_id="p", row_key="b", activity="translate", action="fan-out",
              definition="c", current=True, status="done", stage="gave-up",
              spawned_at="2026-01-01T00:00:00.000Z", condemned=False, abort_reason=None,
              resolved_at=None, child_id="instance.cb", resolved=True, outcome="failed",
              outputs={"wordCount": 1500})
    spec = CohortFilter(outcome=("failed",), where="outputs.wordCount > 1000 && _id == "
                        "'instance.cb' && rowKey == 'b'")
    assert selection.matches_row(spec, row, spec.check(Limits()))
    assert selection.matches_row(None, row)
    assert not selection.matches_row(CohortFilter(status=("active",)), row)


def _ctx(now: datetime) -> PlanContext:
    counter = iter(range(1_000_000))
    return PlanContext(now=now, actor=Actor.system(), dataset="production",
                       limits=Limits(idempotency_ttl_seconds=60),
                       new_key=lambda: f"k{next(counter)}", new_token=lambda: "t")


def test_derived_keys_are_remembered_on_the_row_until_they_expire() -> None:
    row = SubworkflowEntry.model_validate({
        "_key": "r", "activity": "translate", "action": "fan-out", "definition": "c",
        "stageEntry": "s", "cohortStage": "review", "rowKey": "b",
        "ref": {"id": "lake:production:instance.cb"}, "spawnedAt": "2026-01-01T00:00:00Z"})
    derived = selection.row_key("call-1", "b")
    assert derived == "call-1:b"
    ctx = _ctx(NOW)
    assert not selection.marked(row, ctx, derived, "redriveCohort")
    marks = selection.with_mark(row, ctx, derived, "redriveCohort")
    row = row.model_copy(update={"bulkKeys": marks})
    assert selection.marked(row, ctx, derived, "redriveCohort")
    assert not selection.marked(row, ctx, derived, "cancelCohort")  # another verb's key
    assert not selection.marked(row, ctx, "call-2:b", "redriveCohort")
    assert not selection.marked(row, _ctx(NOW + timedelta(seconds=61)), derived, "redriveCohort")
    for n in range(20):  # a row keeps only its newest marks
        row = row.model_copy(update={"bulkKeys": selection.with_mark(row, ctx, f"c{n}:b", "op")})
    assert len(row.bulkKeys or []) == selection.MARKS_KEPT


def test_batches_and_results_add_up() -> None:
    assert list(selection.batches(["a", "b", "c", "d", "e"], 2)) == [["a", "b"], ["c", "d"], ["e"]]
    total = selection.BulkResult(matched=5)
    total.add(selection.BulkResult(applied=2, skipped=1))
    total.add(selection.BulkResult(applied=1, refusals=[selection.BulkRefusal("i", "e", "x", "m")]))
    assert (total.matched, total.applied, total.skipped, len(total.refusals)) == (5, 3, 1, 1)


def test_a_selection_shares_one_budget_and_its_limit_refuses_the_call() -> None:
    wide = [view(f"w{n}", outputs={"list": list(range(300))}) for n in range(20)]
    spec = CohortFilter(where="count(outputs.list[@ > 0]) > 0")
    tree = spec.check(Limits())
    assert all(spec.matches(row, tree, NOW) for row in wide)  # each alone is cheap
    shared = Budget(max_scanned=5_000)
    with pytest.raises(GroqLimitExceeded):  # together they pass the selection's bound
        for row in wide:
            spec.matches(row, tree, NOW, shared)
