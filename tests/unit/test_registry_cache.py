"""The shell's registry cache: one parse per parent revision, bounded by rows, views per row."""

from __future__ import annotations

import gc

from kinflow.core.cohort import registry
from kinflow.core.state import Instance
from kinflow.engine.registry_cache import RegistryCache, RowViews
from tests.core.test_registry import OPEN, ROWS, parent


def _doc(parent_id: str, rev: str, n: int) -> dict:
    doc = parent(*[dict(ROWS[i % len(ROWS)], rowKey=f"r{i}") for i in range(n)])
    return doc | {"_id": parent_id, "_rev": rev}


def test_rows_are_parsed_once_per_revision_and_again_for_a_new_one() -> None:
    cache = RegistryCache()
    first = cache.rows(_doc("p", "r1", 3))
    assert cache.rows(_doc("p", "r1", 3)) is first
    newer = cache.rows(_doc("p", "r2", 4))
    assert newer is not first and len(newer) == 4
    assert cache.held == 4  # one entry per parent: the older revision is gone
    assert newer == registry.registry_rows(_doc("p", "r2", 4))


def test_the_cache_is_bounded_by_rows_and_keeps_the_newest_entry() -> None:
    cache = RegistryCache(limit=5)
    a = cache.rows(_doc("a", "r1", 3))
    cache.rows(_doc("b", "r1", 2))
    assert cache.rows(_doc("a", "r1", 3)) is a and cache.held == 5
    cache.rows(_doc("c", "r1", 1))  # over the limit: the least recent (b) goes
    assert cache.held == 4
    assert cache.rows(_doc("a", "r1", 3)) is a
    big = cache.rows(_doc("d", "r1", 8))  # alone over the limit, still kept
    assert cache.held == 8 and cache.rows(_doc("d", "r1", 8)) is big


def test_a_document_without_a_revision_is_never_kept() -> None:
    cache = RegistryCache()
    doc = _doc("p", "r1", 2)
    del doc["_rev"]
    assert cache.rows(doc) is not cache.rows(doc) and cache.held == 0


def test_views_are_kept_per_row_object_and_forgotten_with_it() -> None:
    views = RowViews()
    instance = Instance.model_validate(_doc("p", "r1", 2))
    row = instance.subworkflows[0]
    seen = views.view(row, OPEN)
    assert seen == registry.row_view(row, OPEN)
    assert views.view(row, OPEN) is seen
    assert views.view(row, None) is not seen and views.view(row, None)["current"] is False
    del instance, row
    gc.collect()
    assert views._views == {}
