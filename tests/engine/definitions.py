"""Definitions shared by the engine tests (authoring form, as users write them)."""

from __future__ import annotations

import copy
from typing import Any

TRANSLATE_ARTICLE: dict[str, Any] = {
    "name": "translate-article",
    "title": "Translate an article",
    "lifecycle": "child",
    "initialStage": "translating",
    "fields": [
        {"name": "locale", "type": "string", "required": True, "initialValue": {"type": "input"}},
        {"name": "source", "type": "doc.ref", "initialValue": {"type": "input"}},
    ],
    "stages": [
        {
            "name": "translating",
            "activities": [
                {"name": "translate", "actions": [
                    {"name": "submit", "status": "done"},
                    {"name": "give-up", "status": "failed"},
                ]}
            ],
            "transitions": [
                {"name": "to-done", "to": "done"},
                {"name": "to-abandoned", "to": "abandoned", "when": "$anyActivityFailed"},
            ],
        },
        {"name": "done"},
        {"name": "abandoned"},
    ],
}

FAN_OUT = {
    "name": "fan-out",
    "when": "true",
    "spawn": {
        "forEach": "*[_id == $fields.subject._id][0].locales",
        "definition": {"name": "translate-article"},
        "with": {
            "locale": "$row",
            "source": "{\"id\": $fields.subject._id, \"type\": $fields.subject._type}",
        },
        "onExit": "abort",
    },
}

ARTICLE_REVIEW: dict[str, Any] = {
    "name": "article-review",
    "title": "Article review",
    "initialStage": "drafting",
    "fields": [
        {"name": "subject", "type": "subject", "required": True,
         "initialValue": {"type": "input"}}
    ],
    "stages": [
        {
            "name": "drafting",
            "activities": [{"name": "write", "actions": [{"name": "submit", "status": "done"}]}],
            "transitions": [{"name": "to-review", "to": "review"}],
        },
        {
            "name": "review",
            "activities": [
                {"name": "translate", "actions": [
                    FAN_OUT,
                    {
                        "name": "all-done",
                        "when": "count($subworkflows[activity == 'translate' && current && "
                                "status == 'active']) == 0",
                        "status": "done",
                    },
                ]},
                {"name": "approve", "actions": [
                    {"name": "approve", "status": "done"},
                    {"name": "reject", "status": "failed"},
                ]},
            ],
            "transitions": [
                {"name": "back-to-drafting", "to": "drafting", "when": "$anyActivityFailed"},
                {"name": "to-published", "to": "published"},
            ],
        },
        {"name": "published"},
    ],
}


def article_review_without_spawn() -> dict[str, Any]:
    """The canonical parent with its spawn action left out (spawn is the next issue)."""
    definition = copy.deepcopy(ARTICLE_REVIEW)
    translate = definition["stages"][1]["activities"][0]
    translate["actions"] = [a for a in translate["actions"] if a["name"] != "fan-out"]
    return definition


def simple(name: str, stages: list[dict[str, Any]], initial: str | None = None,
           fields: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "title": name.title(), "initialStage": initial or stages[0]["name"],
            "fields": fields or [], "stages": stages, **extra}


def counter(name: str) -> dict[str, Any]:
    """Stage ``a`` with an editable counter ``n`` (``bump`` adds one, ``go`` moves on to ``b``)."""
    return simple(name, [
        {"name": "a", "activities": [{"name": "w", "actions": [
            {"name": "bump", "ops": [{"type": "field.inc", "target": "n"}]},
            {"name": "go", "status": "done"}]}],
         "transitions": [{"name": "t", "to": "b"}]},
        {"name": "b"},
    ], fields=[{"name": "n", "type": "number", "editable": True,
                "initialValue": {"type": "literal", "value": 0}}])
