"""The canonical example (article review) end to end: spawn, settle, publish, reject loop-back."""

from __future__ import annotations

import pytest

from kinflow.engine import Actor, Engine
from tests.engine.definitions import ARTICLE_REVIEW, TRANSLATE_ARTICLE

pytestmark = pytest.mark.lake
EDITOR = Actor.person("ed", "editor")


def types(instance) -> list[str]:
    return [row["_type"] for row in instance.history]


async def start_review(engine: Engine, locales: list[str]) -> str:
    await engine.lake.create({"_id": "article-1", "_type": "article", "title": "Hello",
                              "locales": locales})
    await engine.deploy([ARTICLE_REVIEW, TRANSLATE_ARTICLE])
    started = await engine.start_instance("article-review", fields={"subject": "article-1"},
                                          actor=EDITOR)
    return started.instance.id_


async def test_three_locales_spawn_three_children_then_publish(engine: Engine) -> None:
    iid = await start_review(engine, ["de", "fr", "es"])
    submitted = await engine.fire_action(iid, "write", "submit", actor=EDITOR)
    parent = submitted.instance
    assert parent.currentStage == "review"
    rows = parent.subworkflows
    assert [r.rowKey for r in rows] == ["de", "fr", "es"]
    assert all(r.cohortStage == "review" and r.resolved is None for r in rows)
    assert types(parent).count("spawned") == 3
    children = [await engine.get_instance(r.child_id) for r in rows]
    for child, locale in zip(children, ["de", "fr", "es"], strict=True):
        assert child.ancestors[0].id == f"lake:production:{iid}"
        assert child.currentStage == "translating" and child.primed
        fields = {f.name: f.value for f in child.fields}
        assert fields["locale"] == locale
        assert fields["source"]["id"] == "lake:production:article-1"
    translate = parent.open_entry().activity("translate")
    assert translate.status == "active"

    for child in children[:2]:
        await engine.fire_action(child.id_, "translate", "submit", actor=EDITOR)
        middle = await engine.get_instance(iid)
        assert middle.currentStage == "review"
        row = next(r for r in middle.subworkflows if r.child_id == child.id_)
        assert row.resolved is not None and row.resolved.stage == "done"
    await engine.fire_action(children[2].id_, "translate", "submit", actor=EDITOR)
    settled = await engine.get_instance(iid)
    assert settled.open_entry().activity("translate").status == "done"
    assert types(settled).count("subworkflowResolved") == 3

    published = await engine.fire_action(iid, "approve", "approve", actor=EDITOR)
    assert published.instance.currentStage == "published"
    assert published.instance.completedAt is not None


async def test_reject_aborts_the_cohort_and_reentry_spawns_a_fresh_one(engine: Engine) -> None:
    iid = await start_review(engine, ["de", "fr", "es"])
    await engine.fire_action(iid, "write", "submit", actor=EDITOR)
    first = await engine.get_instance(iid)
    old_ids = [r.child_id for r in first.subworkflows]
    await engine.fire_action(old_ids[0], "translate", "submit", actor=EDITOR)

    rejected = await engine.fire_action(iid, "approve", "reject", actor=EDITOR)
    parent = rejected.instance
    assert parent.currentStage == "drafting"
    by_child = {r.child_id: r for r in parent.subworkflows}
    assert by_child[old_ids[0]].resolved.stage == "done"
    for cid in old_ids[1:]:
        row = by_child[cid]
        assert row.abortPending is not None and row.resolved is not None
        assert row.resolved.aborted is True
        child = await engine.get_instance(cid)
        assert child.abortedAt is not None
        aborted = [h for h in child.history if h["_type"] == "aborted"]
        assert "onExit" in aborted[0]["reason"]

    again = await engine.fire_action(iid, "write", "submit", actor=EDITOR)
    parent = again.instance
    assert parent.currentStage == "review"
    current = [r for r in parent.subworkflows if r.stageEntry == parent.open_entry().key_]
    assert sorted(r.rowKey for r in current) == ["de", "es", "fr"]
    assert not {r.child_id for r in current} & set(old_ids)  # a fresh cohort, no adoption
    assert "subworkflowAdopted" not in types(parent)
    for row in current:
        await engine.fire_action(row.child_id, "translate", "submit", actor=EDITOR)
    done = await engine.fire_action(iid, "approve", "approve", actor=EDITOR)
    assert done.instance.currentStage == "published"
