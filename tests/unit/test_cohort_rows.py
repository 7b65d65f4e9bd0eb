"""Which rows a cohort question answers with (pure): the current visit, else the last one."""

from __future__ import annotations

from dataclasses import replace

from kinflow.core.cohort.registry import Row
from kinflow.schema.cohorts import cohort_rows, cohort_signature, definition_activities


def row(key: str, visit: str, current: bool, activity: str = "translate", status: str = "done",
        action: str = "fan-out") -> Row:  # fmt: skip
    return Row(parent_id="p", row_key=key, activity=activity, action=action, definition="leaf",
               current=current, status=status, stage="done", spawned_at="t", condemned=False,
               abort_reason=None, resolved_at=None, child_id=f"c-{visit}-{key}", resolved=True,
               stage_entry=visit)  # fmt: skip


def test_the_current_visit_wins() -> None:
    rows = [row("de", "v1", False), row("fr", "v2", True), row("es", "v2", True)]
    assert [r.row_key for r in cohort_rows(rows, "translate")] == ["fr", "es"]


def test_without_a_current_cohort_the_last_visit_that_spawned_answers() -> None:
    rows = [row("de", "v1", False), row("fr", "v1", False), row("ja", "v3", False),
            row("x", "v4", False, activity="other")]  # fmt: skip
    assert [r.row_key for r in cohort_rows(rows, "translate")] == ["ja"]
    assert [r.row_key for r in cohort_rows(rows, "other")] == ["x"]
    assert cohort_rows(rows, "approve") == []


def test_every_visit_when_asked_and_the_action_filter_after_the_visit() -> None:
    rows = [row("de", "v1", False), row("fr", "v2", False, action="top-up")]
    assert len(cohort_rows(rows, "translate", current_only=False)) == 2
    assert cohort_rows(rows, "translate", action="fan-out") == []  # v2 is the last visit
    assert [r.row_key for r in cohort_rows(rows, "translate", action="top-up")] == ["fr"]


def test_a_stamp_of_a_state_already_shown_is_no_change() -> None:
    live = row("de", "v1", True, status="done")
    stamped = replace(live, resolved_at="later", current=False)
    assert cohort_signature([live]) == cohort_signature([stamped])
    assert cohort_signature([live]) != cohort_signature([replace(live, status="aborted")])


def test_activities_of_every_stage() -> None:
    doc = {"stages": [{"name": "a", "activities": [{"name": "write"}]},
                      {"name": "b", "activities": [{"name": "translate"}, {"name": "approve"}]},
                      {"name": "c"}]}  # fmt: skip
    assert definition_activities(doc) == {"write", "translate", "approve"}
