"""Pure engine core: conditions, cascade, ops, ledger and effects, with no lake."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kinflow.core import verbs
from kinflow.core.cascade import fulfils, hop, next_evaluation_at
from kinflow.core.cohort.registry import subworkflow_rows
from kinflow.core.conditions import Outcome, Renderer, check, next_flip
from kinflow.core.context import Actor, NeedsDocuments, PlanContext
from kinflow.core.errors import ContractViolation, FieldValueInvalid
from kinflow.core.ledger import is_replay, remember
from kinflow.core.state import Instance, SubworkflowEntry
from kinflow.define import sites
from kinflow.define.expand import expand_definition
from kinflow.define.models import WorkflowDefinition
from tests.engine.definitions import simple

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def ctx(now: datetime = NOW, actor: Actor | None = None, **kw: Any) -> PlanContext:
    counter, tokens = itertools.count(), itertools.count()
    return PlanContext(now=now, actor=actor or Actor.system(), dataset="production",
                       new_key=lambda: f"k{next(counter)}",
                       new_token=lambda: f"token{next(tokens)}", **kw)


def deployed(definition: dict[str, Any]) -> dict[str, Any]:
    stored = WorkflowDefinition.model_validate(expand_definition(definition)).to_json()
    return {"_id": f"definition.{stored['name']}.v1", "version": 1, "contentHash": "h", **stored}


def start(definition: dict[str, Any], fields: dict[str, Any] | None = None,
          c: PlanContext | None = None) -> Instance:
    mutation = verbs.plan_start(verbs.StartInstance(deployed(definition), fields,
                                                    "instance.t"), c or ctx())
    return mutation.instance


# ---- conditions ----


def test_three_valued_outcomes() -> None:
    assert check("1 == 1", {}, NOW).outcome is Outcome.SATISFIED
    assert check("1 == 2", {}, NOW).outcome is Outcome.UNSATISFIED
    assert check("$x > 1", {"x": None}, NOW).outcome is Outcome.UNEVALUABLE
    assert check("'text'", {}, NOW).outcome is Outcome.UNEVALUABLE
    assert check(None, {}, NOW).outcome is Outcome.SATISFIED
    unbound = check("$missing == 1", {}, NOW)
    assert unbound.outcome is Outcome.UNEVALUABLE and unbound.detail


def test_fields_overlay_and_reference_dereference() -> None:
    definition = simple("f", [
        {"name": "a", "fields": [{"name": "note", "type": "string",
                                  "initialValue": {"type": "literal", "value": "stage"}}],
         "transitions": [{"name": "t", "to": "b", "when": "false"}]},
        {"name": "b"},
    ], fields=[{"name": "note", "type": "string",
                "initialValue": {"type": "literal", "value": "workflow"}},
               {"name": "subject", "type": "subject", "initialValue": {"type": "input"}}])
    with pytest.raises(NeedsDocuments) as need:
        start(definition, {"subject": "doc-1"})
    assert need.value.uris == ["lake:production:doc-1"]
    c = ctx(documents={"lake:production:doc-1": {"_id": "doc-1", "_type": "article", "n": 3}})
    instance = start(definition, {"subject": "doc-1"}, c)
    renderer = Renderer(instance, instance.definition_model(), c)
    fields = renderer.variables(sites.TRANSITION_WHEN)["fields"]
    assert fields["note"] == "stage"
    assert fields["subject"]["n"] == 3
    assert renderer.variables(sites.SPAWN_FOR_EACH)["fields"]["note"] == "workflow"
    gone = ctx(absent={"lake:production:doc-1"})
    stub = Renderer(instance, instance.definition_model(), gone).variables(
        sites.TRANSITION_WHEN)["fields"]["subject"]
    assert stub == {"_id": "doc-1", "_type": None}


def test_subworkflow_rows_read_what_the_rows_carry() -> None:
    instance = start(simple("s", [{"name": "a", "transitions": [
        {"name": "t", "to": "b", "when": "false"}]}, {"name": "b"}]))
    entry = instance.open_entry()
    base = {"activity": "x", "action": "y", "definition": "c", "cohortStage": "a",
            "spawnedAt": "t", "ref": {"id": "lake:production:c1", "type": "kinflow.instance"}}
    instance.subworkflows = [
        SubworkflowEntry.model_validate({**base, "_key": "1", "rowKey": "de",
                                         "stageEntry": entry.key_}),
        SubworkflowEntry.model_validate({**base, "_key": "2", "rowKey": "fr",
                                         "stageEntry": "old",
                                         "resolved": {"at": "t", "stage": "done"}}),
        SubworkflowEntry.model_validate({**base, "_key": "3", "rowKey": "es",
                                         "stageEntry": entry.key_,
                                         "observed": {"status": "active", "stage": "review",
                                                      "at": "t"}}),
    ]
    rows = subworkflow_rows(instance, entry)
    assert [(r["rowKey"], r["current"], r["status"], r["stage"]) for r in rows] == [
        ("de", True, "active", None), ("fr", False, "done", "done"),
        ("es", True, "active", "review")]
    gate = "count($subworkflows[activity == 'x' && current && status == 'active']) == 0"
    variables = Renderer(instance, instance.definition_model(), ctx()).variables(
        sites.TRIGGER_WHEN, "x")
    assert check(gate, variables, NOW).outcome is Outcome.UNSATISFIED


def test_next_flip_finds_when_a_deadline_passes() -> None:
    deadline = NOW + timedelta(hours=3, seconds=7)
    variables = {"deadline": deadline.isoformat().replace("+00:00", "Z"), "now": "x"}
    flip = next_flip("dateTime($now) > dateTime($deadline)", variables, NOW)
    assert flip is not None
    assert deadline < flip <= deadline + timedelta(milliseconds=2)
    assert next_flip("true", {}, NOW) is None


# ---- cascade ----


def chain() -> dict[str, Any]:
    return simple("chain", [
        {"name": "a", "fields": [{"name": "step", "type": "number",
                                  "initialValue": {"type": "literal", "value": 0}}],
         "activities": [{"name": "w", "actions": [
             # declared first but armed only after `first` has run: needs a second pass
             {"name": "second", "when": "$fields.step == 1", "ops": [
                 {"type": "field.set", "target": "step", "value": {"type": "literal",
                                                                   "value": 2}}],
              "status": "done"},
             {"name": "first", "when": "true", "ops": [
                 {"type": "field.set", "target": "step", "value": {"type": "literal",
                                                                   "value": 1}}]}]}],
         "transitions": [{"name": "halt", "to": "c", "when": "$fields.missing > 1"},
                         {"name": "go", "to": "b"}]},
        {"name": "b", "transitions": [{"name": "on", "to": "c", "when": "true"}]},
        {"name": "c"},
    ])


def test_triggers_run_to_a_fixpoint_but_null_halts_transition_selection() -> None:
    instance = start(chain())
    entry = instance.stages[0]
    assert entry.activity("w").firedActions == ["first", "second"]
    assert entry.activity("w").status == "done"
    assert instance.currentStage == "a"  # `halt` is unevaluable: no fall-through to `go`


def test_one_stage_move_per_hop() -> None:
    definition = chain()
    definition["stages"][0]["transitions"] = [{"name": "go", "to": "b"}]
    instance = start(definition)
    assert instance.currentStage == "b"  # the first hop moved once ...
    result = hop(instance, instance.definition_model(), ctx())
    assert result.moved and instance.currentStage == "c"  # ... the next hop moves again
    assert instance.completedAt is not None
    assert not hop(instance, instance.definition_model(), ctx()).changed


def test_role_pins_and_aliases() -> None:
    definition = WorkflowDefinition.model_validate(expand_definition(simple(
        "r", [{"name": "a"}], roleAliases={"editor": ["admin"], "*": ["root"]})))
    assert fulfils(Actor.person("x", "editor"), ["editor"], definition)
    assert fulfils(Actor.person("x", "admin"), ["editor"], definition)
    assert fulfils(Actor.person("x", "root"), ["editor"], definition)
    assert not fulfils(Actor.person("x", "viewer"), ["editor"], definition)


def test_next_evaluation_at_for_a_time_gate() -> None:
    definition = simple("timer", [
        {"name": "a", "transitions": [
            {"name": "late", "to": "b", "when": "dateTime($now) > dateTime($fields.due)"}]},
        {"name": "b"},
    ], fields=[{"name": "due", "type": "datetime", "initialValue": {"type": "input"}}])
    instance = start(definition, {"due": "2026-01-01T13:00:00.000Z"})
    assert instance.currentStage == "a"
    assert instance.nextEvaluationAt is not None
    assert instance.nextEvaluationAt.startswith("2026-01-01T13:00:00")
    later = ctx(now=NOW + timedelta(hours=2))
    assert hop(instance, instance.definition_model(), later).moved
    assert next_evaluation_at(instance, instance.definition_model(), later) is None


# ---- ops ----


def ops_definition() -> dict[str, Any]:
    literal = {"type": "literal", "value": "x"}
    return simple("ops", [
        {"name": "a", "activities": [{"name": "w", "actions": [
            {"name": "apply", "params": [{"name": "who", "type": "string"}], "ops": [
                {"type": "field.setIfMissing", "target": "label", "value": literal},
                {"type": "field.setIfMissing", "target": "label",
                 "value": {"type": "literal", "value": "ignored"}},
                {"type": "field.inc", "target": "count", "value": {"type": "literal",
                                                                   "value": 5}},
                {"type": "field.dec", "target": "count"},
                {"type": "field.append", "target": "rows", "value": {
                    "type": "object", "fields": {"who": {"type": "param", "param": "who"},
                                                 "done": {"type": "literal", "value": False}}}},
                {"type": "field.append", "target": "rows", "value": {
                    "type": "object", "fields": {"who": {"type": "literal", "value": "z"},
                                                 "done": {"type": "literal", "value": False}}}},
                {"type": "field.updateWhere", "target": "rows", "where": "$row.who == $params.who",
                 "value": {"type": "object", "fields": {"done": {"type": "literal",
                                                                 "value": True}}}},
                {"type": "field.removeWhere", "target": "rows", "where": "$row.who == 'z'"},
                {"type": "field.unset", "target": "note"},
            ], "status": "done"},
            {"name": "wrong", "ops": [{"type": "field.set", "target": "count",
                                       "value": {"type": "literal", "value": "NaN"}}]}]}],
         "transitions": [{"name": "t", "to": "b", "when": "false"}]},
        {"name": "b"},
    ], fields=[
        {"name": "label", "type": "string"},
        {"name": "count", "type": "number", "initialValue": {"type": "literal", "value": 0}},
        {"name": "note", "type": "text", "initialValue": {"type": "literal", "value": "n"}},
        {"name": "rows", "type": "array", "of": [{"name": "who", "type": "string"},
                                                 {"name": "done", "type": "boolean"}]},
    ])


def test_every_field_op_kind() -> None:
    instance = start(ops_definition())
    c = ctx(actor=Actor.person("ann"))
    mutation = verbs.plan_fire_action(instance, verbs.FireAction("w", "apply", {"who": "ann"}), c)
    values = {f.name: f.value for f in mutation.instance.fields}
    assert values["label"] == "x"
    assert values["count"] == 4
    assert values["note"] is None
    assert [(r["who"], r["done"]) for r in values["rows"]] == [("ann", True)]
    assert "_key" in values["rows"][0]
    applied = [r["opType"] for r in mutation.history if r["_type"] == "opApplied"]
    assert applied.count("field.setIfMissing") == 1  # the second found a value: no row
    activity = mutation.instance.open_entry().activity("w")
    assert activity.status == "done" and activity.completedBy == "ann"
    assert [r["_type"] for r in mutation.history][:2] == ["actionFired", "opApplied"]
    assert instance.fields[1].value == 0  # the loaded state is never touched


def test_a_bad_write_is_typed_and_plans_nothing() -> None:
    instance = start(ops_definition())
    with pytest.raises(FieldValueInvalid):
        verbs.plan_fire_action(instance, verbs.FireAction("w", "wrong"), ctx())


# ---- ledger ----


def test_ledger_replay_ttl_and_cross_verb() -> None:
    instance = start(ops_definition())
    c = ctx()
    assert not is_replay(instance, c, "k", "fireAction")
    remember(instance, c, "k", "fireAction")
    assert is_replay(instance, c, "k", "fireAction")
    with pytest.raises(ContractViolation):
        is_replay(instance, c, "k", "editField")
    expired = ctx(now=NOW + timedelta(hours=25))
    assert not is_replay(instance, expired, "k", "editField")
    remember(instance, expired, "other", "editField")
    assert [r.key for r in instance.processedRequests] == ["other"]


def test_a_tick_primes_an_instance_left_unprimed() -> None:
    created = verbs.plan_create(verbs.StartInstance(deployed(chain()), None, "instance.u"), ctx())
    assert not created.primed
    mutation = verbs.plan_hop(created, ctx())
    assert mutation.instance.primed and mutation.changed
    assert mutation.instance.stages[0].activity("w").firedActions == ["first", "second"]
