"""Every GROQ operation pays the budget: function work by its size, values by their bytes,
the deadline seen inside loops, parameters bounded, and the two evaluation lanes."""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any

import pytest

from kinflow import groq
from kinflow.groq import pool

INTERSECTS = 'array::intersects(string::split($a, ""), string::split($b, ""))'
# ({"a": "0123456789"}{"a": a + a}{"a": a + a}...).a: the string doubles at every stage
DOUBLING = "length(({\"a\": \"0123456789\"}" + "{\"a\": a + a}" * 24 + ").a)"
# the same shape with arrays that share their halves: small in memory, huge as an answer
SHARED = "({\"a\": [1]}" + "{\"a\": [a, a]}" * 30 + ").a"


def ticking() -> Any:
    """A clock that moves one second every time it is read."""
    ticks = itertools.count()
    return lambda: float(next(ticks))


def test_pairwise_comparisons_are_charged_before_they_are_made() -> None:
    params = {"a": "x" * 7000, "b": "y" * 7000}
    budget = groq.Budget(max_scanned=5_000_000)
    with pytest.raises(groq.GroqLimitExceeded) as caught:
        groq.evaluate(INTERSECTS, params=params, budget=budget)
    details = caught.value.details
    assert details["limit"] == "documents-scanned"
    assert details["scanned"] >= 7000 * 7000
    small = groq.Budget(max_scanned=5_000_000)
    assert groq.evaluate(INTERSECTS, params={"a": "abc", "b": "xyc"}, budget=small) is True
    assert small.scanned >= 9


def test_the_deadline_is_seen_inside_a_functions_loop() -> None:
    """No scan bound: only the clock, read between the outer elements, can stop it."""
    budget = groq.Budget(timeout=5.0, clock=ticking())
    with pytest.raises(groq.GroqLimitExceeded) as caught:
        groq.evaluate(INTERSECTS, params={"a": "x" * 3000, "b": "y" * 3000}, budget=budget)
    assert caught.value.details["limit"] == "time"
    assert budget.stopped == "time"


def test_a_cancelled_budget_stops_inside_a_long_filter() -> None:
    budget = groq.Budget()
    calls = 0

    def clock_free_cancel(item: int) -> int:
        nonlocal calls
        calls += 1
        if calls == 300:
            budget.cancel()
        return item

    data = [{"n": i} for i in range(5000)]
    with pytest.raises(groq.GroqCancelled):
        groq.evaluate("count(*[n >= 0])", dataset=_Counting(data, clock_free_cancel),
                      budget=budget)
    assert budget.stopped == "cancelled"


class _Counting(list[Any]):
    """A dataset whose elements call back when the filter reads them (``n``)."""

    def __init__(self, rows: list[dict[str, Any]], seen: Any) -> None:
        super().__init__(_Row(row, seen) for row in rows)


class _Row(dict[str, Any]):
    def __init__(self, row: dict[str, Any], seen: Any) -> None:
        super().__init__(row)
        self._seen = seen

    def get(self, key: str, default: Any = None) -> Any:
        value = super().get(key, default)
        return self._seen(value) if key == "n" else value


def test_building_a_string_by_doubling_is_refused_by_the_value_bytes_cap() -> None:
    budget = groq.Budget(max_value_bytes=8 * 1024 * 1024)
    with pytest.raises(groq.GroqLimitExceeded) as caught:
        groq.evaluate(DOUBLING, budget=budget)
    details = caught.value.details
    assert details["limit"] == "value-bytes"
    assert details["maxValueBytes"] == 8 * 1024 * 1024
    assert details["valueBytes"] <= 2 * 8 * 1024 * 1024  # refused before the next doubling
    assert groq.evaluate("length(({\"a\": \"0123456789\"}{\"a\": a + a}).a)",
                         budget=groq.Budget(max_value_bytes=1000)) == 20


def test_an_answer_sharing_values_is_measured_as_written() -> None:
    budget = groq.Budget(max_value_bytes=1024 * 1024)
    with pytest.raises(groq.GroqLimitExceeded) as caught:
        groq.evaluate(SHARED, budget=budget)
    assert caught.value.details["limit"] == "value-bytes"
    small = "({\"a\": [1]}" + "{\"a\": [a, a]}" * 2 + ").a"
    assert groq.evaluate(small, budget=groq.Budget(max_value_bytes=1024)) == [
        [[1], [1]], [[1], [1]]]


def test_joins_splits_and_concatenations_charge_what_they_build() -> None:
    text = "ab" * 5000
    budget = groq.Budget()
    assert groq.evaluate('length(array::join(string::split($t, ""), "-"))',
                         params={"t": text}, budget=budget) == 2 * len(text) - 1
    assert budget.built >= 2 * len(text) - 1 + len(text)
    assert budget.scanned >= 2 * len(text)
    arrays = groq.Budget()
    groq.evaluate("count($x + $x)", params={"x": list(range(1000))}, budget=arrays)
    assert arrays.built >= 8 * 2000


def test_a_wildcard_match_is_charged_its_backtracking_before_any_regex_runs() -> None:
    budget = groq.Budget(max_scanned=1_000_000)
    with pytest.raises(groq.GroqLimitExceeded) as caught:
        groq.evaluate("$t match $p", params={"t": "a" * 200, "p": "a*a*a*b"}, budget=budget)
    assert caught.value.details["limit"] == "documents-scanned"
    ordinary = groq.Budget(max_scanned=1_000_000)
    assert groq.evaluate("$t match 'wor*'", params={"t": "hello world"}, budget=ordinary)


def test_in_over_an_array_charges_its_length() -> None:
    budget = groq.Budget(max_scanned=10_000)
    with pytest.raises(groq.GroqLimitExceeded):
        groq.evaluate("count($rows[@ in $rows])", params={"rows": list(range(200))},
                      budget=budget)


def test_parameters_are_capped_in_size() -> None:
    budget = groq.Budget(max_params_bytes=1000)
    with pytest.raises(groq.GroqLimitExceeded) as caught:
        budget.check_params({"a": "x" * 2000})
    assert caught.value.details == {"limit": "params-bytes", "maxParamsBytes": 1000,
                                    "paramsBytes": 2009}
    budget.check_params({"a": "x" * 100})


async def test_the_engine_lane_is_free_while_callers_fill_theirs() -> None:
    lanes = pool.Lanes(caller_threads=2, engine_threads=1, per_caller=1)
    release = threading.Event()
    try:
        held = [asyncio.ensure_future(lanes.run(lambda: release.wait(30), None, caller))
                for caller in ("viewer:a", "viewer:b", "viewer:c")]
        await asyncio.sleep(0.1)
        # the callers' two threads are taken; the engine's own query still runs
        assert await asyncio.wait_for(lanes.run(lambda: "spawned", None, None), 10) == "spawned"
        assert not any(task.done() for task in held)
    finally:
        release.set()
        await asyncio.gather(*held)
        lanes.close()


async def test_one_caller_holds_at_most_its_share_of_the_callers_lane() -> None:
    lanes = pool.Lanes(caller_threads=2, engine_threads=1, per_caller=1)
    release = threading.Event()
    try:
        first = asyncio.ensure_future(lanes.run(lambda: release.wait(30), None, "viewer:a"))
        second = asyncio.ensure_future(lanes.run(lambda: "second", None, "viewer:a"))
        await asyncio.sleep(0.1)
        assert lanes.waiting("viewer:a") == 2 and not second.done()  # waits for its own
        assert await asyncio.wait_for(lanes.run(lambda: "other", None, "viewer:b"), 10) == "other"
        release.set()
        assert await asyncio.wait_for(second, 10) == "second"
        await first
        assert lanes.waiting("viewer:a") == 0
    finally:
        release.set()
        lanes.close()


async def test_a_caller_that_leaves_while_waiting_for_its_turn_frees_its_place() -> None:
    lanes = pool.Lanes(caller_threads=1, engine_threads=1, per_caller=1)
    release = threading.Event()
    budget = groq.Budget()
    try:
        first = asyncio.ensure_future(lanes.run(lambda: release.wait(30), None, "viewer:a"))
        queued = asyncio.ensure_future(lanes.run(lambda: "late", budget, "viewer:a"))
        await asyncio.sleep(0.1)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        release.set()
        await first
        assert lanes.waiting("viewer:a") == 0
    finally:
        release.set()
        lanes.close()


def test_the_caches_keep_only_small_texts_callers_send() -> None:
    from kinflow.groq import values

    short = "count([1, 2, 3])"
    assert groq.parse(short) is groq.parse(short)
    long_text = "[" + ", ".join(["1"] * 3000) + "]"  # over the cached length
    assert groq.parse(long_text) is not groq.parse(long_text)
    pattern = "a." + "b" * 2000 + ".*"
    assert groq.evaluate("$t in path($p)", params={"t": "x", "p": pattern}) is False
    assert pattern not in values._GLOB_CACHE


async def test_a_callers_wait_for_its_turn_counts_against_its_deadline() -> None:
    lanes = pool.Lanes(caller_threads=2, engine_threads=1, per_caller=1)
    release = threading.Event()
    now = [0.0]
    budget = groq.Budget(timeout=5.0, clock=lambda: now[0])
    try:
        first = asyncio.ensure_future(lanes.run(lambda: release.wait(30), None, "viewer:a"))
        queued = asyncio.ensure_future(lanes.run(
            lambda: groq.evaluate("count([1, 2, 3][@ > 0])", budget=budget), budget,
            "viewer:a"))
        await asyncio.sleep(0.1)
        assert budget.started == 0.0  # its clock started when it asked, not when it ran
        now[0] = 6.0  # past the deadline while it waited
        release.set()
        with pytest.raises(groq.GroqLimitExceeded) as caught:
            await asyncio.wait_for(queued, 10)
        assert caught.value.details["limit"] == "time"
        await first
    finally:
        release.set()
        lanes.close()
