"""Deploy validation: expansion, strict parsing and every invariant, without a lake."""

from __future__ import annotations

import copy

import pytest

from kinflow.core.deploy import plan_deploy, validate_batch
from kinflow.core.errors import DefinitionInvalid, DefinitionTooLarge, SpawnContractsInvalid
from kinflow.define import (
    check_definition,
    content_hash,
    define_action,
    define_activity,
    define_field,
    define_stage,
    define_transition,
    define_workflow,
    expand_definition,
)
from tests.engine.definitions import ARTICLE_REVIEW, TRANSLATE_ARTICLE, simple


def messages(definition: dict) -> list[str]:
    return [f"{i.path}: {i.message}" for i in check_definition(definition).issues]


def test_canonical_definitions_are_valid() -> None:
    assert messages(TRANSLATE_ARTICLE) == []
    assert messages(ARTICLE_REVIEW) == []


def test_expansion_turns_status_into_a_trailing_status_set_op() -> None:
    stored = expand_definition(TRANSLATE_ARTICLE)
    submit = stored["stages"][0]["activities"][0]["actions"][0]
    assert "status" not in submit
    assert submit["ops"] == [{"type": "status.set", "activity": "translate", "status": "done"}]


def test_default_transition_when_is_all_activities_done() -> None:
    stored = expand_definition(TRANSLATE_ARTICLE)
    assert stored["stages"][0]["transitions"][0]["when"] == "$allActivitiesDone"
    assert stored["stages"][0]["transitions"][1]["when"] == "$anyActivityFailed"


def test_expansion_is_idempotent_and_hash_is_stable() -> None:
    once = expand_definition(ARTICLE_REVIEW)
    twice = expand_definition(once)
    assert once == twice
    assert content_hash(once) == content_hash(twice)
    reordered = dict(reversed(list(once.items())))
    assert content_hash(reordered) == content_hash(once)


def test_lexical_field_reference_resolves_narrowest_scope_first() -> None:
    definition = simple("lex", [
        {"name": "a", "fields": [{"name": "note", "type": "string"}],
         "activities": [{"name": "x", "fields": [{"name": "note", "type": "string"}],
                         "actions": [{"name": "go", "status": "done", "ops": [
                             {"type": "field.set", "target": "note",
                              "value": {"type": "literal", "value": "hi"}},
                             {"type": "field.set", "target": {"field": "count"},
                              "value": {"type": "literal", "value": 1}}]}]}],
         "transitions": [{"name": "t", "to": "b"}]},
        {"name": "b"},
    ], fields=[{"name": "count", "type": "number"}])
    stored = expand_definition(definition)
    ops = stored["stages"][0]["activities"][0]["actions"][0]["ops"]
    assert ops[0]["target"] == {"scope": "activity", "field": "note"}
    assert ops[1]["target"] == {"scope": "workflow", "field": "count"}
    assert messages(definition) == []


def test_caller_fired_roles_fold_into_filter() -> None:
    definition = simple("roles", [
        {"name": "a", "activities": [{"name": "x", "actions": [
            {"name": "go", "status": "done", "roles": ["editor"]}]}],
         "transitions": [{"name": "t", "to": "b"}]},
        {"name": "b"},
    ], roleAliases={"editor": ["admin"]})
    action = expand_definition(definition)["stages"][0]["activities"][0]["actions"][0]
    assert "roles" not in action
    assert action["filter"] == 'count($actor.roles[@ in ["editor", "admin"]]) > 0'


def test_python_helpers_produce_the_same_stored_json_as_a_file() -> None:
    built = define_workflow(
        "translate-article",
        title="Translate an article",
        lifecycle="child",
        initial_stage="translating",
        fields=[
            define_field("locale", "string", required=True, initial_value={"type": "input"}),
            define_field("source", "doc.ref", initial_value={"type": "input"}),
        ],
        stages=[
            define_stage(
                "translating",
                activities=[define_activity("translate", [
                    define_action("submit", status="done"),
                    define_action("give-up", status="failed"),
                ])],
                transitions=[
                    define_transition("to-done", "done"),
                    define_transition("to-abandoned", "abandoned", when="$anyActivityFailed"),
                ],
            ),
            define_stage("done"),
            define_stage("abandoned"),
        ],
    )
    assert built == expand_definition(TRANSLATE_ARTICLE)


def test_unknown_keys_are_refused_with_their_path() -> None:
    definition = copy.deepcopy(TRANSLATE_ARTICLE)
    definition["stages"][0]["colour"] = "red"
    assert "stages[0].colour: unknown key" in messages(definition)


def test_five_problems_are_all_reported_at_once() -> None:
    bad = simple("Bad_Name", [
        {"name": "a", "activities": [{"name": "x", "actions": [
            {"name": "go", "when": "$actor.id == 'x'", "status": "done"},
            {"name": "broken", "filter": "count(", "status": "done"}]}],
         "transitions": [{"name": "t", "to": "nowhere"}]},
        {"name": "island"},
        {"name": "a"},
    ], initial="missing")
    issues = check_definition(bad).issues
    text = "\n".join(f"{i.path}: {i.message}" for i in issues)
    assert "must match" in text  # name grammar
    assert "initialStage 'missing'" in text
    assert "names no declared stage" in text  # transition target
    assert "reads $actor" in text  # unbound variable at a cascade gate
    assert "GROQ syntax error" in text
    assert "duplicate stage name" in text
    assert len(issues) >= 5
    with pytest.raises(DefinitionInvalid) as refused:
        validate_batch([bad])
    assert len(refused.value.details["issues"]) == len(issues)
    assert all({"definition", "path", "message"} <= set(i) for i in refused.value.details["issues"])


def test_site_rules_scenario_6() -> None:
    stage_field_read = copy.deepcopy(ARTICLE_REVIEW)
    review = stage_field_read["stages"][1]
    review["fields"] = [{"name": "locales", "type": "string"}]
    review["activities"][0]["actions"][0]["spawn"]["forEach"] = "$fields.locales"
    assert any("reads $fields.locales, which this site does not see" in m
               for m in messages(stage_field_read))
    row_read = copy.deepcopy(ARTICLE_REVIEW)
    row_read["stages"][1]["activities"][0]["actions"][0]["spawn"]["forEach"] = "$row"
    assert any("reads $row" in m for m in messages(row_read))
    actor_read = copy.deepcopy(ARTICLE_REVIEW)
    actor_read["stages"][0]["transitions"][0]["when"] = "$actor.id == 'a'"
    assert any("transition.when: reads $actor" in m for m in messages(actor_read))


def test_conditions_may_not_scan_the_lake() -> None:
    definition = copy.deepcopy(TRANSLATE_ARTICLE)
    definition["stages"][0]["transitions"][0]["when"] = "count(*[_type == 'x']) > 0"
    assert any("may not scan the lake" in m for m in messages(definition))


def test_activity_without_terminal_path_and_terminal_stage_with_activities() -> None:
    definition = simple("paths", [
        {"name": "a", "activities": [{"name": "x", "actions": [{"name": "noop"}]}],
         "transitions": [{"name": "t", "to": "b"}]},
        {"name": "b", "activities": [{"name": "y", "actions": [{"name": "d", "status": "done"}]}]},
    ])
    text = "\n".join(messages(definition))
    assert "has no action that gives it a terminal status" in text
    assert "terminal stage 'b'" in text


def test_cascade_fired_action_takes_no_params_and_required_needs_input() -> None:
    definition = simple("params", [
        {"name": "a", "activities": [{"name": "x", "actions": [
            {"name": "auto", "when": "true", "status": "done",
             "params": [{"name": "p", "type": "string"}]}]}],
         "transitions": [{"name": "t", "to": "b"}]},
        {"name": "b"},
    ], fields=[{"name": "f", "type": "string", "required": True}])
    text = "\n".join(messages(definition))
    assert "takes no params" in text
    assert "required is only allowed" in text


def test_batch_is_ordered_children_first_and_versioned() -> None:
    checked = validate_batch([ARTICLE_REVIEW, TRANSLATE_ARTICLE])
    plan = plan_deploy(checked, {}, "2026-01-01T00:00:00.000Z")
    assert [r.name for r in plan.results] == ["translate-article", "article-review"]
    assert [r.version for r in plan.results] == [1, 1]
    assert [d["_id"] for d in plan.creates] == [
        "definition.translate-article.v1", "definition.article-review.v1"]


def test_identical_content_is_unchanged_and_changed_content_is_a_new_version() -> None:
    checked = validate_batch([TRANSLATE_ARTICLE])
    first = plan_deploy(checked, {}, "t").creates[0]
    deployed = {("translate-article", None): first}
    again = plan_deploy(checked, deployed, "t")
    assert [(r.status, r.version) for r in again.results] == [("unchanged", 1)]
    changed = copy.deepcopy(TRANSLATE_ARTICLE)
    changed["title"] = "Translate, v2"
    bumped = plan_deploy(validate_batch([changed]), deployed, "t")
    assert [(r.status, r.version) for r in bumped.results] == [("created", 2)]


def test_spawn_contracts_list_every_bad_handoff() -> None:
    parent = copy.deepcopy(ARTICLE_REVIEW)
    parent["stages"][1]["activities"][0]["actions"][0]["spawn"]["with"]["foo"] = "1"
    extra = copy.deepcopy(parent["stages"][1]["activities"][0]["actions"][0])
    extra["name"] = "fan-out-missing"
    extra["spawn"]["definition"] = {"name": "missing"}
    extra["spawn"]["with"] = {}
    parent["stages"][1]["activities"][0]["actions"].append(extra)
    with pytest.raises(SpawnContractsInvalid) as refused:
        plan_deploy(validate_batch([parent, TRANSLATE_ARTICLE]), {}, "t")
    reasons = sorted(i["reason"] for i in refused.value.details["issues"])
    assert reasons == ["unconsumable-field", "unresolved-definition"]


def test_dependency_cycle_is_refused() -> None:
    def spawner(name: str, child: str) -> dict:
        return simple(name, [
            {"name": "a", "activities": [{"name": "x", "actions": [
                {"name": "s", "when": "true", "spawn": {"forEach": "[1]",
                                                        "definition": {"name": child}}},
                {"name": "d", "status": "done"}]}],
             "transitions": [{"name": "t", "to": "b"}]},
            {"name": "b"},
        ])
    with pytest.raises(DefinitionInvalid) as refused:
        validate_batch([spawner("a-wf", "b-wf"), spawner("b-wf", "a-wf")])
    assert "dependency cycle" in refused.value.details["issues"][0]["message"]


def test_a_missing_title_hides_no_other_problem() -> None:
    """One definition-invalid lists structural and semantic problems."""
    definition = simple("rounds", [
        {"name": "a", "transitions": [{"name": "t", "to": "ghost"}]},
        {"name": "b", "transitions": [{"name": "u", "to": "a", "when": "$fields.x =="}]},
    ])
    del definition["title"]
    definition["initialStage"] = "nowhere"
    with pytest.raises(DefinitionInvalid) as caught:
        validate_batch([definition])
    issues = {(i["path"], i["message"].splitlines()[0]) for i in caught.value.details["issues"]}
    paths = {path for path, _ in issues}
    assert ("title", "required key is missing") in issues
    assert ("initialStage", "initialStage 'nowhere' names no declared stage") in issues
    assert ("stages[0].transitions[0].to", "transition target 'ghost' names no declared stage"
            ) in issues
    assert "stages[1].transitions[0].when" in paths
    assert any("GROQ syntax error" in message for _, message in issues)
    assert {i["definition"] for i in caught.value.details["issues"]} == {"rounds"}


def test_placeholders_for_a_broken_shape_raise_no_false_problems() -> None:
    definition = copy.deepcopy(TRANSLATE_ARTICLE)
    del definition["name"]  # a placeholder name must not be reported as a bad name
    definition["stages"][0]["activities"][0]["actions"][0]["status"] = "finished"
    definition["stages"][0]["activities"][0]["actions"][1]["ops"] = [{"type": "field.sett"}]
    definition["stages"][1]["colour"] = "red"
    definition["stages"][2] = 5
    found = messages(definition)
    assert found == [
        "name: required key is missing",
        "stages[0].activities[0].actions[0].ops[0].status.set.status: Input should be "
        "'active', 'done', 'skipped' or 'failed'",
        "stages[0].activities[0].actions[1].ops[0]: Input tag 'field.sett' found using "
        "'type' does not match any of the expected tags: 'field.set', 'field.setIfMissing', "
        "'field.unset', 'field.append', 'field.inc', 'field.dec', 'field.updateWhere', "
        "'field.removeWhere', 'status.set'",
        "stages[1].colour: unknown key",
        "stages[2]: Input should be a valid dictionary or instance of Stage",
        # true: no stage is named 'abandoned' any more (stages[2] is not a stage)
        "stages[0].transitions[1].to: transition target 'abandoned' names no declared stage",
    ]


def test_an_oversized_definition_is_refused_before_validation() -> None:
    big = simple("big", [{"name": f"s{i}", "transitions": [{"name": "t", "to": f"s{i + 1}"}]}
                         for i in range(600)] + [{"name": "s600"}])
    broken = {"name": "also-big", "stages": "x" * 50_000}
    with pytest.raises(DefinitionTooLarge) as caught:
        validate_batch([TRANSLATE_ARTICLE, big, broken], max_bytes=20_000)
    details = caught.value.details
    assert caught.value.code == "definition-too-large" and details["limit"] == 20_000
    assert [(d["definition"], d["index"]) for d in details["definitions"]] == [
        ("big", 1), ("also-big", 2)]
    assert all(d["bytes"] > 20_000 for d in details["definitions"])
    assert validate_batch([big], max_bytes=200_000)[0].model is not None


def test_validation_is_linear_in_the_number_of_stages() -> None:
    """12,000 chained stages: stage lookups by name, not by scanning the list per transition."""
    stages = [{"name": f"s{i}", "transitions": [{"name": "t", "to": f"s{i + 1}"}]}
              for i in range(12_000)] + [{"name": "s12000"}]
    checked = validate_batch([simple("long", stages)])
    assert checked[0].model is not None and len(checked[0].model.stages) == 12_001
