"""Deploy refuses every broken parent-to-child handoff at once; a start names its handoff."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kinflow.core.errors import RequiredFieldNotProvided, SpawnContractsInvalid
from kinflow.engine import Engine
from tests.engine.cohort_defs import child, items, parent

pytestmark = pytest.mark.lake


def approval() -> dict[str, Any]:
    """A child with a required input (``amount``), an optional one and a computed one."""
    return {
        "name": "approval", "title": "Approve one line", "lifecycle": "child",
        "initialStage": "deciding",
        "fields": [
            {"name": "amount", "type": "number", "required": True,
             "initialValue": {"type": "input"}},
            {"name": "note", "type": "string", "initialValue": {"type": "input"}},
            {"name": "currency", "type": "string",
             "initialValue": {"type": "literal", "value": "EUR"}},
        ],
        "stages": [
            {"name": "deciding", "activities": [{"name": "decide", "actions": [
                {"name": "approve", "status": "done"}]}],
             "transitions": [{"name": "to-done", "to": "done"}]},
            {"name": "done"},
        ],
    }


def report(*spawns: tuple[str, dict[str, str]]) -> dict[str, Any]:
    """A parent whose stage ``review`` has one spawn action per ``(action, with)``."""
    actions: list[dict[str, Any]] = [
        {"name": name, "when": "false", "spawn": {
            "forEach": "$fields.lines", "definition": {"name": "approval"}, "with": handed}}
        for name, handed in spawns
    ]
    actions.append({"name": "finish", "status": "done"})
    return {
        "name": "report", "title": "An expense report", "initialStage": "review",
        "fields": [{"name": "lines", "type": "array", "initialValue": {"type": "input"}, "of": [
            {"name": "amount", "type": "number"}, {"name": "note", "type": "string"}]}],
        "stages": [
            {"name": "review", "activities": [{"name": "lines", "actions": actions}],
             "transitions": [{"name": "to-done", "to": "done"}]},
            {"name": "done"},
        ],
    }


GOOD = {"amount": "$row.amount", "note": "'from the report'"}


async def test_every_broken_handoff_is_named_in_one_refusal(engine: Engine) -> None:
    broken = report(
        ("missing", {"note": "$row.note"}),
        ("misspelled", {"amount": "$row.amount", "nite": "$row.note"}),
        ("computed", {"amount": "$row.amount", "currency": "'USD'"}),
        ("wrong-type", {"amount": "'twelve'"}),
        ("fine", GOOD),
    )
    with pytest.raises(SpawnContractsInvalid) as refused:
        await engine.deploy([broken, approval()])
    issues = refused.value.details["issues"]
    named = sorted((i["action"], i["reason"], i["field"]) for i in issues)
    assert named == [
        ("computed", "unconsumable-field", "currency"),
        ("missing", "missing-required-input", "amount"),
        ("misspelled", "unconsumable-field", "nite"),
        ("wrong-type", "wrong-type", "amount"),
    ]
    for issue in issues:
        assert (issue["parent"], issue["stage"], issue["activity"], issue["child"]) == (
            "report", "review", "lines", "approval")
    details = {i["action"]: i["detail"] for i in issues}
    assert details["missing"] == ("report -> approval (stage review, action missing): with "
                                  "leaves out approval.amount, a required input")
    assert "'twelve'" in details["wrong-type"] and "number" in details["wrong-type"]
    message = refused.value.message
    assert message.startswith("4 bad parent-to-child handoff(s): report -> approval")
    assert message.endswith("; and 3 more")
    assert await engine.lake.count({}) == 0


async def test_the_check_reads_a_child_deployed_earlier(engine: Engine) -> None:
    await engine.deploy([approval()])
    with pytest.raises(SpawnContractsInvalid) as refused:
        await engine.deploy([report(("missing", {}))])
    [issue] = refused.value.details["issues"]
    assert (issue["reason"], issue["field"], issue["child"]) == (
        "missing-required-input", "amount", "approval")
    outcome = await engine.deploy([report(("fine", GOOD))])
    assert [d.status for d in outcome.definitions] == ["created"]


async def test_constants_that_fit_and_expressions_pass(engine: Engine) -> None:
    fits = report(("constant", {"amount": "12.5", "note": "'a' + 'b'"}),
                  ("computed", {"amount": "$row.amount * 2", "note": "null"}))
    outcome = await engine.deploy([fits, approval()])
    assert sorted(d.name for d in outcome.definitions) == ["approval", "report"]


async def test_a_handoff_that_leaves_an_input_empty_says_so_at_the_start(engine: Engine) -> None:
    empty = copy.deepcopy(parent())
    empty["stages"][1]["activities"][0]["actions"][0]["spawn"]["with"] = {"item": "$row.nope"}
    await engine.deploy([empty, child(required=True)])
    started = await engine.start_instance("p", fields=items("a"))
    with pytest.raises(RequiredFieldNotProvided) as refused:
        await engine.fire_action(started.instance.id_, "go", "go")
    details = refused.value.details
    assert details == {"fields": ["item"], "source": "handoff", "parent": "p",
                       "stage": "review", "activity": "translate", "action": "fan-out",
                       "child": "c"}
    assert "the spawn of p (stage review, action fan-out) to c" in refused.value.message
    with pytest.raises(RequiredFieldNotProvided) as own:
        await engine.start_instance("c")
    assert own.value.details == {"fields": ["item"], "source": "input", "definition": "c"}
    assert "the start must pass in fields" in own.value.message


async def test_a_constant_null_for_a_required_input_is_refused(engine: Engine) -> None:
    with pytest.raises(SpawnContractsInvalid) as refused:
        await engine.deploy([report(("nothing", {"amount": "null"})), approval()])
    [issue] = refused.value.details["issues"]
    assert (issue["reason"], issue["field"]) == ("wrong-type", "amount")
    assert "leaves the required input 'amount' empty" in issue["detail"]
