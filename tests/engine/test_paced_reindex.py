"""examples/definitions/paced-reindex.json over examples/content/articles.ndjson: the
priority, the per-release key, a pause that holds the queue (and offers report-hold
through ``$cohort.paused``), a resume, and the parent done by ``$cohort``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kinflow.core.errors import ActionDisabled
from kinflow.core.state import Instance
from kinflow.define.loading import load_definitions
from kinflow.engine import Engine
from tests.engine.invariants import assert_repaired

pytestmark = pytest.mark.lake
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def live(instance: Instance) -> list[str]:
    return sorted(r.rowKey for r in instance.subworkflows if not r.queued and r.resolved is None)


async def index(engine: Engine, parent: Instance, key: str) -> Instance:
    row = next(r for r in parent.subworkflows if r.rowKey == key)
    await engine.fire_action(row.child_id, "index", "indexed")
    return await engine.get_instance(parent.id_)


async def test_the_paced_reindex_example_pauses_resumes_and_reads_its_cohort(
        engine: Engine) -> None:
    for line in (EXAMPLES / "content" / "articles.ndjson").read_text().splitlines():
        await engine.lake.create(json.loads(line))
    await engine.deploy(load_definitions(EXAMPLES / "definitions" / "paced-reindex.json"))
    p = (await engine.start_instance("paced-reindex")).instance
    assert live(p) == ["article-1", "article-4"]  # the most locales first, one per release
    with pytest.raises(ActionDisabled):
        await engine.fire_action(p.id_, "reindex", "report-hold", params={"note": "x"})
    await engine.pause_cohort(p.id_, "reindex", reason="search cluster down")
    await engine.fire_action(p.id_, "reindex", "report-hold", params={"note": "down"})
    held = await index(engine, p, "article-1")
    assert live(held) == ["article-4"]  # article-2 waits for the resume
    resumed = await engine.resume_cohort(p.id_, "reindex")
    assert live(resumed) == ["article-2", "article-4"]
    for key in ("article-4", "article-2", "article-3"):
        resumed = await index(engine, resumed, key)
    assert resumed.currentStage == "done"
    await assert_repaired(engine)
