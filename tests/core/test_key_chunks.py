"""A spawn's identity check on a sparse parent (core/cohort/sparse.py): only the rows with
the spawn's row keys matter, so it holds the chunks the shell names for those keys
(``PlanContext.key_chunks``) instead of every chunk; pure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kinflow.core.cohort import sparse, tallies
from kinflow.core.context import Actor, NeedsChunks, NeedsKeyChunks, PlanContext, key_chunks_key
from kinflow.core.state import Instance
from tests.core.test_paged_selection import registry

CHUNK = sparse.CHUNK


def parent(held: list[int]) -> Instance:
    rows = registry()
    found = sparse.SparseRows(len(rows))
    for chunk in held:
        found.add(chunk, rows[chunk * CHUNK:(chunk + 1) * CHUNK], [])
    fields: dict[str, Any] = {"rowCount": len(rows), "cohortRows": tallies.summarise(rows),
                              "subworkflows": found, "id_": "p"}
    return Instance.model_construct(**fields)


def context(results: dict[str, Any]) -> PlanContext:
    return PlanContext(now=datetime(2026, 1, 1, tzinfo=UTC), actor=Actor.system(),
                       dataset="d", query_results=results, new_key=lambda: "k",
                       new_token=lambda: "t")


def test_the_shell_is_asked_which_chunks_hold_the_keys() -> None:
    with pytest.raises(NeedsKeyChunks) as asked:
        context({}).key_chunks("p", ["b", "a", "a"])
    assert (asked.value.parent_id, asked.value.keys) == ("p", ("a", "b"))
    answered = context({key_chunks_key("p", ("a", "b")): [3]})
    assert answered.key_chunks("p", ["a", "b"]) == [3]


def test_a_top_up_compares_its_keys_with_the_chunks_holding_them() -> None:
    instance = parent([3])
    rows = sparse.identity_rows(instance, "translate", "v1", False, lambda: [3])
    assert [place for place, _ in rows] == list(range(3 * CHUNK, 4 * CHUNK))
    with pytest.raises(NeedsChunks) as asked:  # a chunk not held is read first
        list(sparse.identity_rows(instance, "translate", "v1", False, lambda: [1, 3, 99]))
    assert asked.value.chunks == {1}
    with pytest.raises(NeedsChunks) as asked:  # without the lookup: every row
        list(sparse.identity_rows(instance, "translate", "v1", False))
    assert asked.value.chunks == {0, 1, 2}
