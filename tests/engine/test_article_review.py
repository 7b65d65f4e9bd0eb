"""The canonical article review (spawn left out) driven to published through Engine."""

from __future__ import annotations

import pytest

from kinflow.core.errors import ActionDisabled
from kinflow.engine import Actor, Engine
from tests.engine.definitions import TRANSLATE_ARTICLE, article_review_without_spawn

pytestmark = pytest.mark.lake
EDITOR = Actor.person("ed", "editor")


def history_types(instance) -> list[str]:
    return [row["_type"] for row in instance.history]


async def test_article_review_reaches_published_through_the_reject_loop(engine: Engine) -> None:
    await engine.lake.create({"_id": "article-1", "_type": "article", "title": "Hello",
                              "locales": ["de", "fr"]})
    deployed = await engine.deploy([article_review_without_spawn(), TRANSLATE_ARTICLE])
    assert [(d.name, d.version, d.status) for d in deployed.definitions] == [
        ("article-review", 1, "created"), ("translate-article", 1, "created")]

    started = await engine.start_instance("article-review", fields={"subject": "article-1"},
                                          actor=EDITOR)
    instance = started.instance
    assert instance.currentStage == "drafting"
    assert instance.fields[0].value == {"id": "lake:production:article-1"}
    assert instance.watch == ["lake:production:article-1"]
    iid = instance.id_

    submitted = await engine.fire_action(iid, "write", "submit", actor=EDITOR)
    assert submitted.instance.currentStage == "review"
    assert submitted.cascaded == 1
    # the settled gate reads an empty registry, so all-done fired on entry
    review = submitted.instance.open_entry()
    assert review is not None
    translate = review.activity("translate")
    assert translate is not None and translate.status == "done"
    assert translate.firedActions == ["all-done"]

    rejected = await engine.fire_action(iid, "approve", "reject", actor=EDITOR)
    assert rejected.instance.currentStage == "drafting"
    assert len(rejected.instance.stages) == 3

    await engine.fire_action(iid, "write", "submit", actor=EDITOR)
    published = await engine.fire_action(iid, "approve", "approve", actor=EDITOR)
    final = published.instance
    assert final.currentStage == "published"
    assert final.completedAt is not None and final.abortedAt is None
    assert [s.name for s in final.stages] == [
        "drafting", "review", "drafting", "review", "published"]
    # the trigger fired once per visit of review
    assert [a for s in final.stages if s.name == "review"
            for a in s.activity("translate").firedActions] == ["all-done", "all-done"]
    types = history_types(final)
    assert types[0] == "stageEntered"
    assert types[-3:] == ["stageExited", "transitionFired", "stageEntered"]

    with pytest.raises(ActionDisabled) as refused:
        await engine.fire_action(iid, "approve", "approve", actor=EDITOR)
    assert refused.value.details["reason"] == "instance-completed"
