"""The shipped examples run end to end: release.yaml (three levels) and machine translation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kinflow.core.cohort.registry import subworkflow_rows
from kinflow.define.loading import load_definitions
from kinflow.engine import EffectCall, Engine
from kinflow.worker import Worker
from tests.engine.invariants import all_instances, assert_repaired

pytestmark = pytest.mark.lake
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "definitions"


async def release(engine: Engine) -> str:
    await engine.lake.create({"_id": "rel-1", "_type": "release"})
    for n, locales in enumerate([["de", "fr"], ["es"]]):
        await engine.lake.create({"_id": f"art-{n}", "_type": "article", "release": "rel-1",
                                  "title": f"Article {n}", "locales": locales})
    await engine.deploy([*load_definitions(EXAMPLES / "release.yaml"),
                         *load_definitions(EXAMPLES / "article-review.json")])
    started = await engine.start_instance("release", fields={"subject": "rel-1"})
    return started.instance.id_


def by_definition(instances: dict[str, Any], name: str) -> list[Any]:
    return [i for i in instances.values() if i.definition == name]


async def test_release_tree_settles_when_every_review_is_approved(engine: Engine) -> None:
    rid = await release(engine)
    instances = await all_instances(engine)
    reviews = by_definition(instances, "release-review")
    translations = by_definition(instances, "translate-article")
    assert len(reviews) == 2 and len(translations) == 3
    for t in translations:
        await engine.fire_action(t.id_, "translate", "submit")
    for r in reviews:
        await engine.fire_action(r.id_, "sign-off", "approve")
    shipped = await engine.get_instance(rid)
    assert all(r.resolved and r.resolved.stage == "approved" for r in shipped.subworkflows)
    visit = next(s for s in shipped.stages if s.name == "reviewing")
    reviews_entry = next(a for a in visit.activities if a.name == "reviews")
    assert reviews_entry.status == "done"
    assert reviews_entry.firedActions == ["fan-out", "all-approved"]
    assert shipped.currentStage == "shipped" and shipped.terminal_state == "completed"
    await assert_repaired(engine)


async def test_cancelling_a_release_aborts_every_descendant(engine: Engine) -> None:
    rid = await release(engine)
    cancelled = await engine.fire_action(rid, "manage", "cancel")
    assert cancelled.instance.currentStage == "cancelled"
    instances = await all_instances(engine)
    below = [i for i in instances.values() if i.id_ != rid]
    assert len(below) == 5 and all(i.abortedAt for i in below)
    await assert_repaired(engine)


async def test_machine_translation_children_complete_through_an_effect_handler(
        engine: Engine) -> None:
    calls: list[str] = []

    def translate(call: EffectCall) -> dict[str, Any]:
        calls.append(call.params["locale"])
        return {"text": f"[{call.params['locale']}] {call.params['title']}"}

    engine.register_handler("machine-translate", translate)
    await engine.lake.create({"_id": "article-1", "_type": "article", "title": "Hello",
                              "locales": ["de", "fr", "es"]})
    await engine.deploy(load_definitions(EXAMPLES / "machine-translation.json"))
    started = await engine.start_instance("machine-translation-batch",
                                          fields={"subject": "article-1"})
    assert len(started.instance.subworkflows) == 3
    report = await Worker(engine, grace_seconds=0).run_pass()
    assert len(report.of("effects")) == 3 and not report.failed
    assert sorted(calls) == ["de", "es", "fr"]
    done = await engine.get_instance(started.instance.id_)
    assert done.currentStage == "done"
    assert all(r.resolved and r.resolved.stage == "done" for r in done.subworkflows)


# ---- translation-cohort.json: a window, a failure budget and outputs -------------------


async def translation_cohort(engine: Engine, locales: list[str]) -> str:
    await engine.lake.create({"_id": "article-w", "_type": "article", "title": "Windows",
                              "locales": locales})
    await engine.deploy(load_definitions(EXAMPLES / "translation-cohort.json"))
    started = await engine.start_instance("translation-cohort", fields={"subject": "article-w"})
    return started.instance.id_


async def cohort_rows(engine: Engine, parent_id: str) -> dict[str, dict[str, Any]]:
    """The parent's rows as ``$subworkflows`` sees them, by locale."""
    parent = await engine.get_instance(parent_id)
    return {r["rowKey"]: r for r in subworkflow_rows(parent, parent.open_entry())}


def statuses(rows: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {key: row["status"] for key, row in rows.items()}


async def test_translation_cohort_holds_its_window_and_sums_the_word_counts(
        engine: Engine) -> None:
    pid = await translation_cohort(engine, ["de", "fr", "es", "it"])
    rows = await cohort_rows(engine, pid)
    assert statuses(rows) == {"de": "active", "fr": "active", "es": "queued", "it": "queued"}

    await engine.fire_action(rows["de"]["_id"], "translate", "submit", params={"words": 600})
    rows = await cohort_rows(engine, pid)
    assert statuses(rows) == {"de": "done", "fr": "active", "es": "active", "it": "queued"}
    assert rows["de"]["outcome"] == "succeeded"
    assert rows["de"]["outputs"] == {"locale": "de", "wordCount": 600}

    # One failure is within the budget of one: the window moves on, nothing is skipped.
    failed = await engine.fire_action(rows["fr"]["_id"], "translate", "give-up")
    assert failed.instance.currentStage == "abandoned"
    rows = await cohort_rows(engine, pid)
    assert statuses(rows) == {"de": "done", "fr": "done", "es": "active", "it": "active"}
    assert rows["fr"]["outcome"] == "failed"

    await engine.fire_action(rows["es"]["_id"], "translate", "submit", params={"words": 300})
    parent = await engine.get_instance(pid)
    assert parent.currentStage == "translating"  # "it" still runs
    await engine.fire_action(rows["it"]["_id"], "translate", "submit", params={"words": 200})

    parent = await engine.get_instance(pid)
    assert parent.currentStage == "copy-edit"  # 600 + 300 + 200 > 1000
    assert not [h for h in parent.history if h.get("_type") == "cohortFailed"]
    done = await engine.fire_action(pid, "edit", "approve")
    assert done.instance.currentStage == "published"
    await assert_repaired(engine)


async def test_translation_cohort_fails_when_a_second_child_fails(engine: Engine) -> None:
    pid = await translation_cohort(engine, ["de", "fr", "es", "it", "pt"])
    rows = await cohort_rows(engine, pid)
    await engine.fire_action(rows["de"]["_id"], "translate", "give-up")
    rows = await cohort_rows(engine, pid)
    assert statuses(rows) == {"de": "done", "fr": "active", "es": "active", "it": "queued",
                              "pt": "queued"}
    await engine.fire_action(rows["es"]["_id"], "translate", "give-up")

    parent = await engine.get_instance(pid)
    assert parent.currentStage == "over-budget" and parent.terminal_state == "completed"
    assert [h["activity"] for h in parent.history if h.get("_type") == "cohortFailed"] == [
        "translate"]
    final = {r["rowKey"]: r for r in subworkflow_rows(parent, None)}
    assert {k: (r["status"], r["outcome"]) for k, r in final.items()} == {
        "de": ("done", "failed"), "es": ("done", "failed"), "fr": ("aborted", "aborted"),
        "it": ("aborted", "aborted"), "pt": ("aborted", "aborted")}
    skipped = {r.rowKey: r.abortReason for r in parent.subworkflows if r.rowKey in ("it", "pt")}
    assert skipped == {"it": "failure-budget-exceeded", "pt": "failure-budget-exceeded"}
    fr = await engine.get_instance(rows["fr"]["_id"])
    assert fr.abortedAt  # the live child was aborted (abort-rest)
    await assert_repaired(engine)
