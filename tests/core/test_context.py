"""The plan context: input only, the sans-I/O handshake, and no clock of its own."""

from __future__ import annotations

import pytest

from kinflow.core.context import (
    Actor,
    Limits,
    NeedsDefinition,
    NeedsDocuments,
    NeedsLakeQuery,
    PlanContext,
    query_key,
)
from tests.core.support import NOW, ctx


def test_a_context_needs_its_key_and_token_factories() -> None:
    with pytest.raises(TypeError):
        PlanContext(now=NOW, actor=Actor.system(), dataset="production")  # type: ignore[call-arg]
    c = ctx()
    assert [c.new_key(), c.new_key(), c.new_token()] == ["k0", "k1", "token0"]
    assert c.now_iso == "2026-01-01T12:00:00.000Z" and c.gdr("a") == "lake:production:a"


def test_reads_not_given_are_asked_for() -> None:
    c = ctx()
    with pytest.raises(NeedsLakeQuery) as asked:
        c.lake_query("count(*)", {"x": 1})
    assert asked.value.cache_key == query_key("count(*)", {"x": 1})
    c.query_results[asked.value.cache_key] = 7
    assert c.lake_query("count(*)", {"x": 1}) == 7
    with pytest.raises(NeedsDocuments) as docs:
        c.document("lake:production:a")
    assert docs.value.uris == ["lake:production:a"]
    c.absent.add("lake:production:a")
    assert c.document("lake:production:a") is None
    with pytest.raises(NeedsDefinition) as needed:
        c.definition("child", None)
    assert (needed.value.name, needed.value.version) == ("child", None)
    c.definitions[("child", None)] = None
    assert c.definition("child", None) is None


def test_a_query_budget_is_timed_only_on_the_clock_the_shell_gives() -> None:
    untimed = Limits().groq_budget()
    assert untimed.timeout is None and untimed.clock is None
    ticks = iter([100.0, 101.0])
    timed = Limits(budget_clock=lambda: next(ticks)).groq_budget()
    assert timed.timeout == 10.0 and timed.max_scanned == 5_000_000
    timed.start()
    assert timed.deadline == 110.0
