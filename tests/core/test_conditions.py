"""Conditions: three-valued outcomes, the fast paths, and what every site binds."""

from __future__ import annotations

from datetime import timedelta

from kinflow.core.conditions import (
    Outcome,
    always_variables,
    check,
    classify,
    next_flip,
    reads_now,
)
from kinflow.core.context import Actor
from kinflow.timestamps import iso
from tests.core.support import NOW, ctx, definition, start


def test_only_true_satisfies_and_only_false_fails() -> None:
    assert [classify(v) for v in (True, False, None, 1, "true")] == [
        Outcome.SATISFIED, Outcome.UNSATISFIED, Outcome.UNEVALUABLE, Outcome.UNEVALUABLE,
        Outcome.UNEVALUABLE]  # fmt: skip


def test_fast_paths_agree_with_groq() -> None:
    for text, variables in (("true", {}), ("null", {}), ("$flag", {"flag": False}),
                            ("$missing", {}), (" $flag ", {"flag": True})):  # fmt: skip
        fast = check(text, variables, NOW)
        slow = check(f"({text.strip()})", variables, NOW)
        assert fast.outcome is slow.outcome, text


def test_a_groq_error_is_unevaluable_with_its_first_line() -> None:
    verdict = check("count(", {}, NOW)
    assert verdict.outcome is Outcome.UNEVALUABLE and verdict.detail
    assert "\n" not in verdict.detail


def test_time_gates_flip_once_the_moment_passes() -> None:
    text = "dateTime($now) > dateTime($due)"
    due = NOW + timedelta(minutes=5)
    assert reads_now(text) and not reads_now("$fields.x > 1")
    assert check(text, {"now": iso(NOW), "due": iso(due)}, NOW).outcome is Outcome.UNSATISFIED
    flip = next_flip(text, {"now": iso(NOW), "due": iso(due)}, NOW)
    assert flip is not None and due < flip <= due + timedelta(milliseconds=2)


def test_always_variables_of_a_started_instance() -> None:
    instance = start(definition("v", [
        {"name": "a", "activities": [{"name": "w"}],
         "transitions": [{"name": "t", "to": "b", "when": "false"}]},
        {"name": "b"}]), c=ctx(actor=Actor.person("ann")))  # fmt: skip
    variables = always_variables(instance, ctx())
    assert variables["self"] == "lake:production:instance.t"
    assert variables["stage"] == "a" and variables["now"] == iso(NOW)
    assert variables["parent"] is None and variables["ancestors"] == []
    assert [a["name"] for a in variables["activities"]] == ["w"]
    assert not variables["allActivitiesDone"] and not variables["anyActivityFailed"]
    assert variables["subworkflows"] == [] and variables["effects"] == {}
