"""The GROQ budget: elements visited, a deadline on an injected clock, cancellation."""

from __future__ import annotations

import asyncio
import itertools
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from kinflow import groq
from kinflow.core.conditions import SNAPSHOT_MAX_SCANNED, Outcome, check
from kinflow.groq.store import off_loop

NESTED = 'count(*[_type == "atkrow" && n < 4 && count(*[count(*[n == ^.n]) > 0]) > 0])'


def rows(count: int) -> list[dict[str, Any]]:
    return [{"_id": f"row-{i:05d}", "_type": "atkrow", "n": i % 7} for i in range(count)]


def test_a_pass_over_an_array_charges_its_length() -> None:
    budget = groq.Budget(max_scanned=1000)
    assert groq.evaluate("*[n < 3]._id", dataset=rows(10), budget=budget) == [
        "row-00000", "row-00001", "row-00002", "row-00007", "row-00008", "row-00009"]
    assert budget.scanned == 10 + 6  # the filter, then the map over what it kept


def test_results_are_the_same_under_a_budget() -> None:
    data = rows(50)
    for query in ("*[n == 3]{_id, 'same': count(*[n == ^.n])}", "*|order(n desc)[0..3]._id",
                  "count(*[n > 2])", "*[_type == 'atkrow'][].n"):
        bounded = groq.evaluate(query, dataset=data, budget=groq.Budget(max_scanned=10**6))
        assert bounded == groq.evaluate(query, dataset=data)


def test_the_nested_attack_is_refused_by_the_documents_scanned_bound() -> None:
    budget = groq.Budget(max_scanned=200_000)
    with pytest.raises(groq.GroqLimitExceeded) as caught:
        groq.evaluate(NESTED, dataset=rows(2030), budget=budget)
    error = caught.value
    assert error.code == "groq-limit-exceeded"
    assert error.details["limit"] == "documents-scanned"
    assert error.details["maxScanned"] == 200_000
    assert 200_000 < error.details["scanned"] <= 200_000 + 2030
    assert budget.stopped == "documents-scanned"


def test_the_deadline_reads_only_the_injected_clock() -> None:
    ticks = itertools.count()
    budget = groq.Budget(timeout=5.0, clock=lambda: float(next(ticks)))
    with pytest.raises(groq.GroqLimitExceeded) as caught:
        groq.evaluate(NESTED, dataset=rows(300), budget=budget)
    assert caught.value.details["limit"] == "time"
    assert caught.value.details["timeoutSeconds"] == 5.0
    assert caught.value.details["elapsedSeconds"] > 5.0
    assert budget.stopped == "time"


def test_a_timeout_needs_a_clock() -> None:
    with pytest.raises(ValueError):
        groq.Budget(timeout=1.0)


def test_a_cancelled_budget_stops_at_its_next_check() -> None:
    budget = groq.Budget()
    budget.cancel()
    with pytest.raises(groq.GroqCancelled):
        groq.evaluate("*[n > 1]", dataset=rows(5), budget=budget)
    assert budget.stopped == "cancelled"


async def test_cancelling_the_awaiting_task_stops_the_worker_thread() -> None:
    budget = groq.Budget()  # no limit: only the cancellation can stop it
    finished = threading.Event()
    outcome: list[str] = []
    data = rows(2030)

    def work() -> Any:
        try:
            return groq.evaluate(NESTED, dataset=data, budget=budget)
        except groq.GroqCancelled:
            outcome.append("cancelled")
            raise
        finally:
            finished.set()

    task = asyncio.ensure_future(off_loop(work, budget))
    for _ in range(2000):  # until the evaluation is under way
        if budget.scanned > 10_000:
            break
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert budget.cancelled
    assert await asyncio.to_thread(finished.wait, 30.0)
    assert outcome == ["cancelled"] and budget.stopped == "cancelled"
    assert budget.scanned < 2030 ** 3  # it stopped early, far from the full work


def test_conditions_on_the_snapshot_are_bounded_without_a_clock() -> None:
    wide = list(range(1500))  # 1500 x 1500 elements visited: over the bound
    text = "count($fields.rows[count($fields.rows[@ == 1]) > 0]) > 0"
    assert 1500 * 1500 > SNAPSHOT_MAX_SCANNED
    verdict = check(text, {"fields": {"rows": wide}}, now=datetime.now(UTC))
    assert verdict.outcome is Outcome.UNEVALUABLE
    assert "visits more than" in (verdict.detail or "")
    small = check(text, {"fields": {"rows": wide[:100]}}, now=datetime.now(UTC))
    assert small.outcome is Outcome.SATISFIED


async def test_a_long_query_is_refused_before_it_is_parsed() -> None:
    from kinflow.groq.store import query_collection

    class NoCollection:  # nothing may be read for a refused query
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the collection was used ({name})")

    text = "[" + "1," * 60_000 + "1]"  # parsing this takes about a second on the loop
    budget = groq.Budget(max_length=100_000)
    with pytest.raises(groq.GroqLimitExceeded) as caught:
        await query_collection(NoCollection(), text, budget=budget)
    assert caught.value.details == {"limit": "query-length", "maxLength": 100_000,
                                    "length": len(text)}
    assert await query_collection(NoCollection(), "[1, 2][1]",
                                  budget=groq.Budget(max_length=100_000)) == 2
