"""A Mutation is what one commit writes: the planners fill it, the shell executes it."""

from __future__ import annotations

from kinflow.core.mutation import Mutation
from tests.core.support import definition, start

MEMO = definition("memo", [{"name": "a", "transitions": [{"name": "t", "to": "b"}]},
                           {"name": "b"}])  # fmt: skip


def test_a_fresh_mutation_writes_nothing_but_its_instance() -> None:
    m = Mutation(start(MEMO))
    assert (m.insert, m.changed, m.dirty, m.replay) == (False, False, False, False)
    assert (m.creates, m.settle, m.clears, m.effects_queued) == ([], [], [], [])
    assert m.size_limit is None and m.size_reserve == 0
