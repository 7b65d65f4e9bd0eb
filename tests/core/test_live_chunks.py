"""Where a sparse parent's missing child can be (core/cohort/sparse.py, observe.py): the
chunks the summary says hold a live row, and the held rows whose child should be live;
pure."""

from __future__ import annotations

from typing import Any

from kinflow.core.cohort import observe, sparse, tallies
from kinflow.core.state import Instance, ResolvedRow
from tests.core.test_paged_selection import AT, registry

CHUNK = sparse.CHUNK


def test_only_the_chunks_holding_live_rows_are_looked_at() -> None:
    rows = registry()  # queued rows but one running row in chunk 3
    rows[2] = rows[2].model_copy(update={"queued": None})  # running in chunk 0
    rows[CHUNK] = rows[CHUNK].model_copy(update={"queued": None, "outcome": "succeeded",
                                                 "resolved": ResolvedRow(at=AT)})  # finished
    found = sparse.SparseRows(len(rows))
    for chunk in (0, 1, 3):
        found.add(chunk, rows[chunk * CHUNK:(chunk + 1) * CHUNK], [])
    fields: dict[str, Any] = {"rowCount": len(rows), "cohortRows": tallies.summarise(rows),
                              "subworkflows": found}
    instance = Instance.model_construct(**fields)
    assert sparse.live_chunks(instance) == [0, 3]
    live = [(place, row.rowKey) for place, row in sparse.held_rows(instance)
            if observe.expects_child(instance, row)]
    assert live == [(2, "r2"), (3 * CHUNK + 2, "r5")]
