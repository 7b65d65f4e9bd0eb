"""Deploy rules of a spawn's admission and settlement keys (docs/subworkflows.md#admission,
docs/subworkflows.md#settlement): every key accepted in its full form, every problem refused
with its path, all of them in one ``definition-invalid``."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kinflow.core.deploy import validate_batch
from kinflow.define import check_definition
from kinflow.define.cohort_keys import AggregateSpec, parse_aggregate
from tests.engine.definitions import simple

FULL: dict[str, Any] = {
    "forEach": "*[_type == 'article']",
    "definition": {"name": "child"},
    "maxActive": 200,
    "maxActivePerKey": 5,
    "concurrencyKey": "$row.site",
    "priority": "select($row.tier == 'gold' => 10, 0)",
    "startRate": {"count": 100, "perSeconds": 60},
    "childTimeoutSeconds": 900,
    "onTimeout": "cancel",
    "retry": {"attempts": 3, "backoffSeconds": 30, "factor": 2, "maxBackoffSeconds": 3600,
              "on": ["failed", "timed-out"]},
    "completeWhen": "$cohort.succeeded >= 3",
    "onComplete": "continue",
    "aggregate": {"words": "sum(outputs.wordCount)", "slow": "count(outputs.ms > 5000)",
                  "all": "count()", "tries": "max(attempt)"},
    "failureBudget": {"count": 3},
    "onBudgetExceeded": "pause",
}


def parent(spawn: dict[str, Any]) -> dict[str, Any]:
    return simple("parent", [
        {"name": "fan", "activities": [{"name": "work", "actions": [
            {"name": "go", "spawn": spawn}, {"name": "finish", "status": "done"}]}],
         "transitions": [{"name": "t", "to": "end", "when": "$cohort.settled"}]},
        {"name": "end"},
    ])


def problems(spawn: dict[str, Any]) -> dict[str, str]:
    issues = check_definition(parent(spawn)).issues
    prefix = "stages[0].activities[0].actions[0].spawn."
    return {i.path.removeprefix(prefix): i.message for i in issues}


def with_changes(**changes: Any) -> dict[str, Any]:
    spawn = copy.deepcopy(FULL)
    for key, value in changes.items():
        if value is None:
            spawn.pop(key, None)
        else:
            spawn[key] = value
    return spawn


def test_every_key_in_its_full_form_deploys() -> None:
    assert problems(FULL) == {}


@pytest.mark.parametrize(("changes", "path"), [
    ({"maxActivePerKey": None}, "maxActivePerKey"),
    ({"concurrencyKey": None}, "concurrencyKey"),
    ({"childTimeoutSeconds": None}, "onTimeout"),
    ({"completeWhen": None}, "onComplete"),
    ({"retry": {"attempts": 2, "backoffSeconds": 60, "maxBackoffSeconds": 10}},
     "retry.maxBackoffSeconds"),
    ({"retry": {"attempts": 2, "on": []}}, "retry.on"),
    ({"aggregate": {"x": "median(outputs.ms)"}}, "aggregate.x"),
    ({"aggregate": {"x": "sum(outputs.ms > 3)"}}, "aggregate.x"),
    ({"aggregate": {"x": "count(outputs.ms > $limit)"}}, "aggregate.x"),
    ({"aggregate": {"x": "count(outputs.ms >)"}}, "aggregate.x"),
    ({"priority": "$row.tier ==="}, "priority"),
    ({"completeWhen": "$cohort.succeeded >= $params.n"}, "completeWhen"),
])
def test_each_problem_is_refused_at_its_key(changes: dict[str, Any], path: str) -> None:
    found = problems(with_changes(**changes))
    assert path in found, found


@pytest.mark.parametrize(("key", "value"), [
    ("maxActivePerKey", 0),
    ("startRate", {"count": 0, "perSeconds": 60}),
    ("startRate", {"count": 5, "perSeconds": 0}),
    ("childTimeoutSeconds", 0),
    ("onTimeout", "ignore"),
    ("onComplete", "stop"),
    ("retry", {"attempts": 0}),
    ("retry", {"attempts": 2, "on": ["aborted"]}),
    ("retry", {"attempts": 2, "factor": 0.5}),
    ("onBudgetExceeded", "halt"),
])
def test_a_value_out_of_range_is_refused(key: str, value: Any) -> None:
    assert problems(with_changes(**{key: value})) != {}


def test_all_problems_come_in_one_refusal() -> None:
    spawn = with_changes(maxActivePerKey=None, childTimeoutSeconds=None,
                         aggregate={"x": "median(outputs.ms)"})
    with pytest.raises(Exception) as refused:
        validate_batch([parent(spawn)])
    assert getattr(refused.value, "code", None) == "definition-invalid"
    paths = " ".join(str(issue) for issue in refused.value.details["issues"])
    for key in ("maxActivePerKey", "onTimeout", "aggregate.x"):
        assert key in paths


def test_aggregate_entries_parse_into_function_path_and_condition() -> None:
    assert parse_aggregate("w", "sum( outputs.wordCount )") == AggregateSpec(
        "w", "sum", path=("outputs", "wordCount"))
    assert parse_aggregate("s", "count(outputs.ms > 5000)") == AggregateSpec(
        "s", "count", condition="outputs.ms > 5000")
    assert parse_aggregate("n", "count()") == AggregateSpec("n", "count")
    with pytest.raises(ValueError, match="row path"):
        parse_aggregate("a", "avg(outputs[0])")
