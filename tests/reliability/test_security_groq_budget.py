"""GROQ work a viewer used to get for free (``tests/reliability/groq_attacks.py``),
replayed against a real server: pairwise comparisons, values built by doubling, cohort
``where`` filters evaluated row by row on the event loop, and an operator's spawn queued
behind a viewer.

A real uvicorn server on 127.0.0.1 in this test's event loop; ``/healthz`` is polled
over real sockets while each attack runs. Bounds on time are generous hang guards;
the measured figures are printed (``bench/groq_attack.py`` measures them against
``kinflow serve``).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from kinflow.groq import pool
from tests.engine.cohort_defs import child, items, parent
from tests.reliability import groq_attacks as attack
from tests.reliability.health_probe import HealthProbe
from tests.reliability.test_security_groq import (
    HEALTHZ_BOUND,
    error,
    listening,
    post,
    seed_rows,
)

pytestmark = pytest.mark.lake
VIEWER = "viewer-token-groq-budget"
OPERATOR = "operator-token-groq-budget"
ADMIN = "admin-token-groq-budget"
TOKENS = f"{VIEWER}=vera:viewer,{OPERATOR}=otto:operator,{ADMIN}=ada:admin"
PAGE = attack.cohort_page("translate")
FIRE_COHORT = attack.fire_cohort("translate")


def serving(lake_uri: str, database: str, **overrides: Any
            ) -> contextlib.AbstractAsyncContextManager[str]:  # fmt: skip
    """The app behind a real uvicorn server with a viewer's, an operator's and an admin's token."""
    return listening(lake_uri, database, api_tokens=TOKENS, **overrides)


def rss_bytes() -> int:
    """This process's resident memory (the server runs in it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def spawning_from_the_lake() -> dict[str, Any]:
    """``sp``: its first stage spawns one child per ``atkrow`` document the lake holds
    (a ``forEach`` over ``*``: the engine's own query)."""
    definition = parent('*[_type == "atkrow"][0..4]._id', name="sp")
    definition["stages"] = definition["stages"][1:]
    definition["initialStage"] = "review"
    return definition


@pytest.fixture
def database(lake_uri: str) -> Iterator[str]:
    """A database of its own, dropped afterwards."""
    name = f"groqb_{uuid.uuid4().hex[:12]}"
    yield name
    client: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    client.drop_database(name)
    client.close()


@pytest.fixture
def small_lake(lake_uri: str, database: str) -> str:
    seed_rows(lake_uri, database, count=50)
    return database


async def test_pairwise_work_is_refused_within_the_timeout_and_spawns_run_meanwhile(
    lake_uri: str, small_lake: str
) -> None:
    params = {"a": "x" * 7000, "b": "y" * 7000}
    async with serving(lake_uri, small_lake, groq_timeout=2) as base:
        body, took = await post(base, VIEWER, attack.GROQ, {"q": attack.INTERSECTS, "p": params})
        refused = error(body)
        assert refused["code"] == "groq-limit-exceeded"
        assert refused["details"]["limit"] == "documents-scanned"  # charged before the work
        assert refused["details"]["scanned"] >= 7000 * 7000
        print(f"intersects, default bounds: refused in {took:.2f} s")
    # no scan bound: only the deadline, checked inside the comparisons, stops it
    async with serving(lake_uri, small_lake, groq_timeout=2, groq_max_scanned=0) as base:
        await post(base, ADMIN, attack.DEPLOY, {"d": [spawning_from_the_lake(), child()]})
        async with HealthProbe(base) as probe:
            attacks = [asyncio.ensure_future(post(base, VIEWER, attack.GROQ,
                                                  {"q": attack.INTERSECTS, "p": params}))
                       for _ in range(4)]
            await asyncio.sleep(0.5)  # the viewer's queries hold the callers' threads
            started, spawn_took = await post(base, OPERATOR, attack.START, {"d": "sp", "f": None})
            answers = await asyncio.gather(*attacks)
        assert "errors" not in started, started
        instance = started["data"]["startInstance"]["instance"]
        assert len(instance["subworkflows"]) == 5  # the spawn ran while the viewer attacked
        for body, _took in answers:
            assert error(body)["details"]["limit"] == "time"
            assert error(body)["details"]["timeoutSeconds"] == 2.0
        assert set(probe.statuses) == {200} and probe.worst < HEALTHZ_BOUND
        print(f"intersects, time bound only: answers in {[round(t, 2) for _, t in answers]} s "
              f"(one viewer's four queries, one thread, one deadline each); operator spawn "
              f"{spawn_took:.2f} s; /healthz worst {probe.worst * 1000:.0f} ms")


async def test_doubling_a_value_is_refused_before_the_memory_is_taken(
    lake_uri: str, database: str
) -> None:
    async with serving(lake_uri, database, groq_max_scanned=1000) as base:
        await post(base, VIEWER, attack.GROQ, {"q": "count(*)"})  # warm up before measuring
        before = rss_bytes()
        body, took = await post(base, VIEWER, attack.GROQ, {"q": attack.DOUBLING})
        grown = rss_bytes() - before
    refused = error(body)
    assert refused["code"] == "groq-limit-exceeded"
    assert refused["details"]["limit"] == "value-bytes"
    assert refused["details"]["maxValueBytes"] == 64 * 1024 * 1024
    assert grown < 100 * 1024 * 1024
    print(f"doubling: refused in {took:.2f} s, RSS grew {grown / 2**20:.1f} MiB")


async def test_a_cohort_filter_is_one_budget_off_the_event_loop(
    lake_uri: str, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    callers: list[str | None] = []
    original = pool.Lanes.run

    async def recording(self: pool.Lanes, fn: Any, budget: Any, caller: str | None) -> Any:
        callers.append(caller)
        return await original(self, fn, budget, caller)

    monkeypatch.setattr(pool.Lanes, "run", recording)
    async with serving(lake_uri, database, groq_timeout=2, groq_max_scanned=0) as base:
        await post(base, ADMIN, attack.DEPLOY, {"d": [parent(), child()]})
        begun, _ = await post(base, OPERATOR, attack.START,
                              {"d": "p", "f": items("a", "b", "c", "d", "e")})
        parent_id = begun["data"]["startInstance"]["instance"]["id"]
        await post(base, OPERATOR, attack.GO, {"i": parent_id})
        ordinary, _ = await post(base, VIEWER, PAGE, {"p": parent_id,
                                                      "w": {"where": "rowKey == 'c'"}})
        assert ordinary["data"]["cohort"]["total"] == 5
        async with HealthProbe(base) as probe:
            body, took = await post(base, VIEWER, PAGE, {"p": parent_id,
                                                         "w": {"where": attack.HEAVY_WHERE}})
            fired, fire_took = await post(base, OPERATOR, FIRE_COHORT,
                                          {"p": parent_id, "w": {"where": attack.HEAVY_WHERE}})
        for answer in (body, fired):
            refused = error(answer)
            assert refused["code"] == "groq-limit-exceeded"
            assert refused["details"]["limit"] == "time"  # one deadline for every row
        assert set(probe.statuses) == {200} and probe.worst < HEALTHZ_BOUND
        # each in its caller's lane of the evaluation threads, never the engine's
        assert {c.split(":")[1] for c in callers if c is not None} == {"vera", "otto"}
        print(f"cohort filter on 5 rows: page refused in {took:.2f} s, fireCohort in "
              f"{fire_took:.2f} s; /healthz worst {probe.worst * 1000:.0f} ms over "
              f"{len(probe.latencies)} polls")


async def test_parameters_are_bounded_in_size(lake_uri: str, database: str) -> None:
    async with serving(lake_uri, database, groq_max_params_bytes=10_000) as base:
        body, _ = await post(base, VIEWER, attack.GROQ, {"q": "$a", "p": {"a": "x" * 20_000}})
        refused = error(body)
        assert refused["code"] == "groq-limit-exceeded"
        assert refused["details"]["limit"] == "params-bytes"
        assert refused["details"]["maxParamsBytes"] == 10_000
        fine, _ = await post(base, VIEWER, attack.GROQ, {"q": "length($a)", "p": {"a": "x" * 100}})
        assert fine == {"data": {"groq": 100}}
