"""core/cohort/budget.py: when a budget is exceeded, what acting does, and the redrive hook."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core import verbs
from kinflow.core.cohort import budget
from kinflow.core.cohort.chunks import replace_row
from kinflow.core.state import Instance, ResolvedRow
from kinflow.errors import InvalidInput
from tests.core.spawning import child, knowing, parent
from tests.core.support import start


def test_a_count_budget_allows_exactly_n_failures() -> None:
    three = budget.Budget(count=3)
    assert not three.exceeded(3, 10) and three.exceeded(4, 10)
    assert budget.Budget(count=0).exceeded(1, 1) and not budget.Budget(count=0).exceeded(0, 5)


def test_a_percent_budget_counts_every_row_of_the_cohort() -> None:
    twenty = budget.Budget(percent=20)
    assert not twenty.exceeded(2, 10) and twenty.exceeded(3, 10)
    assert not twenty.exceeded(20, 100) and twenty.exceeded(21, 100)
    third = budget.Budget(percent=33.3)  # 1 of 3 rows is 33.33 %: more than allowed
    assert third.exceeded(1, 3) and not budget.Budget(percent=100).exceeded(3, 3)


@pytest.mark.parametrize("value", [{"count": 1, "percent": 5}, {}, {"count": -1},
                                   {"count": 1.5}, {"count": True}, {"percent": 0},
                                   {"percent": 100.5}, {"rate": 3}, "3", 3, None, [1]])
def test_parse_refuses_every_bad_shape_as_invalid_input(value: Any) -> None:
    with pytest.raises(InvalidInput) as refused:
        budget.parse(value)
    assert refused.value.code == "invalid-input"
    assert refused.value.details["field"] == "failureBudget"


def test_parse_accepts_the_two_shapes() -> None:
    assert budget.parse({"count": 0}) == budget.Budget(count=0)
    assert budget.parse({"percent": 12.5}).to_json() == {"percent": 12.5}


def spawned(spawn: dict[str, Any]) -> tuple[Instance, Any]:
    raw = parent('["a", "b", "c", "d"]')
    raw["stages"][0]["activities"][0]["actions"][0]["spawn"].update(spawn)
    c = knowing(child(), raw)
    instance = start(raw, c=c)
    return verbs.plan_fire_action(instance, verbs.FireAction("translate", "fan"), c).instance, c


def fail_row(instance: Instance, index: int, outcome: str = "failed") -> None:
    replace_row(instance, index, outcome=outcome, resolved=ResolvedRow(
        at="2026-01-01T12:00:00Z", aborted=True if outcome == "aborted" else None))


def test_enforce_skips_queued_rows_condemns_live_ones_and_fails_the_activity() -> None:
    p, c = spawned({"failureBudget": {"count": 0}, "maxActive": 2})
    definition = p.definition_model()
    assert [bool(r.queued) for r in p.subworkflows] == [False, False, True, True]
    assert not budget.enforce(p, definition, c)  # nothing failed yet
    fail_row(p, 0)
    assert budget.enforce(p, definition, c)
    rows = p.subworkflows
    assert rows[1].abortPending is not None and rows[1].abortReason == budget.REASON
    assert [(r.outcome, r.abortReason, bool(r.queued)) for r in rows[2:]] == [
        ("aborted", budget.REASON, False)] * 2
    entry = p.open_entry()
    assert entry is not None and entry.activity("translate").status == "failed"  # type: ignore[union-attr]
    failed = [h for h in p.history if h["_type"] == "cohortFailed"]
    assert len(failed) == 1 and failed[0]["failed"] == 1 and failed[0]["total"] == 4
    assert not budget.enforce(p, definition, c)  # once per cohort


def test_continue_leaves_live_rows_alone() -> None:
    p, c = spawned({"failureBudget": {"percent": 10}, "onBudgetExceeded": "continue"})
    fail_row(p, 0, "aborted")  # an aborted row counts as failed
    assert budget.enforce(p, p.definition_model(), c)
    assert all(r.abortPending is None and r.resolved is None for r in p.subworkflows[1:])


def test_no_budget_never_acts() -> None:
    p, c = spawned({})
    for index in range(4):
        fail_row(p, index)
    assert not budget.enforce(p, p.definition_model(), c)
    assert [h for h in p.history if h["_type"] == "cohortFailed"] == []


def test_an_operator_budget_overrides_the_declared_one() -> None:
    p, c = spawned({"failureBudget": {"count": 0}})
    cohort = (p.subworkflows[0].activity, p.subworkflows[0].stageEntry)
    assert budget.set_budget(p, cohort, budget.Budget(count=2))
    assert not budget.set_budget(p, cohort, budget.Budget(count=2))  # unchanged
    fail_row(p, 0)
    fail_row(p, 1)
    assert not budget.enforce(p, p.definition_model(), c)
    fail_row(p, 2)
    assert budget.enforce(p, p.definition_model(), c)


def test_reopen_on_redrive_returns_the_activity_while_its_visit_is_open() -> None:
    p, c = spawned({"failureBudget": {"count": 0}})
    cohort = (p.subworkflows[0].activity, p.subworkflows[0].stageEntry)
    assert not budget.reopen_on_redrive(p, c, cohort)  # the budget never acted
    fail_row(p, 0)
    budget.enforce(p, p.definition_model(), c)
    assert budget.reopen_on_redrive(p, c, cohort)
    entry = p.open_entry()
    assert entry is not None and entry.activity("translate").status == "active"  # type: ignore[union-attr]
    own = budget.setting(p, cohort)
    assert own is not None and own.budgetExceededAt is None
    # still over budget: the next enforce acts again
    assert budget.enforce(p, p.definition_model(), c)
