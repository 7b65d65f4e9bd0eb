"""What the process keeps of a sparse parent (engine/sparse_load.py): the chunks of its
next starts in start order, the highest priority first; no lake."""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core.cohort import sparse, tallies
from kinflow.core.state import Instance
from kinflow.engine import sparse_load
from tests.core.test_priority import CHUNK, row


def test_the_kept_chunks_are_those_of_the_highest_waiting_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse, "KEPT_CHUNKS", 3)
    rows = [row(i, 9.0 if i in (3 * CHUNK + 1, 5 * CHUNK) else 0.0) for i in range(8 * CHUNK)]
    held = sparse.SparseRows(len(rows))
    for chunk in range(8):
        held.add(chunk, rows[chunk * CHUNK:(chunk + 1) * CHUNK], [])
    fields: dict[str, Any] = {"rowCount": len(rows), "cohortRows": tallies.summarise(rows),
                              "subworkflows": held}
    kept = sparse_load.kept_copy(Instance.model_construct(**fields))
    assert sorted(sparse.rows_of(kept).held) == [3, 5, 7]  # the last chunk, then the gold
    plain = [row(i, None) for i in range(8 * CHUNK)]
    held = sparse.SparseRows(len(plain))
    for chunk in range(8):
        held.add(chunk, plain[chunk * CHUNK:(chunk + 1) * CHUNK], [])
    fields = {"rowCount": len(plain), "cohortRows": tallies.summarise(plain),
              "subworkflows": held}
    kept = sparse_load.kept_copy(Instance.model_construct(**fields))
    assert sorted(sparse.rows_of(kept).held) == [0, 1, 7]  # registry order
