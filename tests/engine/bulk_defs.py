"""Definitions for the bulk cohort verb tests (engine, API, CLI, reliability)."""

from __future__ import annotations

from typing import Any

from tests.engine.cohort_defs import parent
from tests.engine.definitions import simple

ANY_UNSUCCEEDED = ("count($subworkflows[activity == 'translate' && current"
                   " && outcome != 'succeeded']) == 0")
"""The gate: the parent stays in the spawning visit while a row did not succeed."""


def nudgeable() -> dict[str, Any]:
    """A child whose ``task.nudge`` adds one to ``nudges`` (refused by its filter when the
    item is ``locked``) and ``task.finish`` ends it; a child whose item starts with ``d``
    ends in ``done`` at once. Outputs: ``wordCount`` (from the spawn) and ``nudges``."""
    work = {"name": "work", "activities": [{"name": "task", "actions": [
        {"name": "nudge", "filter": "$fields.item != 'locked'",
         "ops": [{"type": "field.inc", "target": "nudges"}]},
        {"name": "finish", "status": "done"}]}],
        "transitions": [
            {"name": "to-done-at-once", "to": "done",
             "when": "string::startsWith($fields.item, 'd')"},
            {"name": "to-done", "to": "done"}]}
    return simple("c", [work, {"name": "done"}], lifecycle="child",
                  outputs=["wordCount", "nudges"], fields=[
                      {"name": "item", "type": "string", "initialValue": {"type": "input"}},
                      {"name": "wordCount", "type": "number", "initialValue": {"type": "input"}},
                      {"name": "nudges", "type": "number",
                       "initialValue": {"type": "literal", "value": 0}}])


def cohort_parent(*, max_active: int | None = None) -> dict[str, Any]:
    """``p`` spawning one ``c`` per ``items`` record ({name, words}) in ``review``, with a
    caller-fired ``top-up`` that spawns one more row (``extra``) into the same cohort."""
    top_up = {"name": "top-up", "spawn": {"forEach": "['extra']", "definition": {"name": "c"},
                                          "with": {"item": "$row", "wordCount": "0"}}}
    definition = parent('$fields.items[]{"_key": name, name, words}',
                        settled=ANY_UNSUCCEEDED, extra_actions=[top_up])
    spawn = definition["stages"][1]["activities"][0]["actions"][0]["spawn"]
    spawn["with"] = {"item": "$row.name", "wordCount": "$row.words"}
    if max_active is not None:
        spawn["maxActive"] = max_active
    definition["fields"][0]["of"].append({"name": "words", "type": "number"})
    return definition


def records(*names: str, words: int = 1) -> dict[str, Any]:
    """``p``'s start fields: one record per name, ``words`` counting up from ``words``."""
    return {"items": [{"name": n, "words": words + i} for i, n in enumerate(names)]}
