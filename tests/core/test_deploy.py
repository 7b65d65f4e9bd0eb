"""Deploy planning: validation into one refusal, children first, content-hash versions."""

from __future__ import annotations

import pytest

from kinflow.core.definitions import DEFINITION_TYPE
from kinflow.core.deploy import plan_deploy, validate_batch
from kinflow.core.errors import DefinitionInvalid, DefinitionTooLarge
from tests.core.support import definition

MEMO = definition("memo", [{"name": "a", "transitions": [{"name": "t", "to": "b"}]},
                           {"name": "b"}])  # fmt: skip


def test_a_new_definition_is_v1_and_the_same_content_is_unchanged() -> None:
    plan = plan_deploy(validate_batch([MEMO]), {}, "2026-01-01T00:00:00.000Z")
    assert [(r.name, r.version, r.status) for r in plan.results] == [("memo", 1, "created")]
    created = plan.creates[0]
    assert (created["_id"], created["_type"], created["version"]) == (
        "definition.memo.v1", DEFINITION_TYPE, 1)
    again = plan_deploy(validate_batch([MEMO]), {("memo", None): created}, "later")
    assert [(r.version, r.status) for r in again.results] == [(1, "unchanged")]
    assert again.creates == []
    changed = {**MEMO, "title": "Memo 2"}
    bumped = plan_deploy(validate_batch([changed]), {("memo", None): created}, "later")
    assert [(r.version, r.status) for r in bumped.results] == [(2, "created")]


def test_every_problem_is_listed_in_one_refusal() -> None:
    bad = definition("bad", [{"name": "a", "transitions": [{"name": "t", "to": "nowhere"}]}])
    with pytest.raises(DefinitionInvalid) as refused:
        validate_batch([bad, {"name": "worse"}])
    assert {i["definition"] for i in refused.value.details["issues"]} == {"bad", "worse"}
    with pytest.raises(DefinitionTooLarge):
        validate_batch([MEMO], max_bytes=10)
