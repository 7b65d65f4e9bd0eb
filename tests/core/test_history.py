"""History rows: one key, one moment, no empty values."""

from __future__ import annotations

from kinflow.core.history import EXECUTION_CONTEXT, actor_stamp, record
from kinflow.timestamps import iso
from tests.core.support import ALICE, NOW, ctx, definition, start


def test_a_row_carries_the_commit_moment_and_leaves_out_none() -> None:
    instance = start(definition("h", [{"name": "a"}]))
    before = len(instance.history)
    c = ctx(actor=ALICE)
    row = record(instance, c, "noted", reason=None, detail="x")
    assert instance.history[before:] == [row]
    assert row["_type"] == "noted" and row["at"] == iso(NOW) and row["detail"] == "x"
    assert "reason" not in row and row["executionContext"] == EXECUTION_CONTEXT
    assert actor_stamp(c) == ALICE.to_json()
