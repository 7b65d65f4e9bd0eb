"""The profiling helpers of bench/: py-spy summaries and the heartbeat's explain reading.

The benchmarks are scripts that import their siblings, so ``bench/`` goes on
the path here; only their pure helpers are tested (no lake, no server).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(autouse=True, scope="module")
def _bench_on_path() -> None:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))


RAW = "\n".join([
    "thread (1): MainThread;Runner.run (asyncio/runners.py:118);"
    "RequestResponseCycle.run_asgi (uvicorn/x.py:1);Mutation.fire_action (kinflow/m.py:9);"
    "run_transaction (kinflow/t.py:5) 30",
    "thread (1): MainThread;Runner.run (asyncio/runners.py:118);"
    "ChangeHub._run (kinflow/storage/hub.py:3) 10",
    "thread (2): secantus-conn-127.0.0.1:1;dispatch (secantus/commands.py:1);"
    "_update (secantus/commands.py:2) 40",
    "thread (3): secantus-conn-127.0.0.1:2;_recv_exactly (secantus/wire.py:109) 60",
])


def test_summary_groups_the_daemons_connection_threads_and_shares_busy_samples() -> None:
    from _spy_summary import summarise

    lines = [line.strip() for line in summarise(RAW, seconds=1.0, rate=100).splitlines()]
    assert lines[0] == "lake connections: 100 samples (100% of one core)"
    main = lines.index("MainThread: 40 samples (40% of one core)")
    lake, mainthread = lines[:main], lines[main:]
    assert "40.0%    update" in lake
    assert "60.0%  lake daemon: waiting to read a request" in lake
    assert "75.0%  HTTP request (uvicorn, middleware, GraphQL, resolvers)" in mainthread
    assert "75.0%    fireAction resolver" in mainthread
    assert "25.0%  change hub (change stream, dispatch)" in mainthread
    assert not any("update" in line for line in mainthread)


def test_a_read_is_keyed_by_its_predicates_not_their_values() -> None:
    from heartbeat import shape_of

    one = shape_of("find", {"find": "production", "filter": {
        "_type": "kinflow.instance", "nextEvaluationAt": {"$gt": "", "$lte": "2026-01-01"}}})
    other = shape_of("find", {"find": "production", "filter": {
        "_type": "kinflow.instance", "nextEvaluationAt": {"$gt": "", "$lte": "2027-01-01"}}})
    assert one == other == "find production {_type:=,nextEvaluationAt:$gt/$lte}"
    counted = shape_of("aggregate", {"aggregate": "production", "pipeline": [
        {"$match": {"_id": "instance.x", "completedAt": None}}, {"$group": {"_id": 1}}]})
    assert counted == "aggregate production {_id:=,completedAt:=}"


def test_the_plan_is_read_from_find_and_aggregate_explains() -> None:
    from heartbeat import plan_of

    index_scan = {"stage": "IXSCAN", "indexName": "instance_due"}
    found = plan_of({
        "queryPlanner": {"winningPlan": {"stage": "LIMIT", "inputStage": {
            "stage": "FETCH", "inputStage": index_scan}}},
        "executionStats": {"totalDocsExamined": 7}})
    assert found == ("IXSCAN instance_due", 7)
    aggregated = plan_of({"stages": [
        {"$cursor": {"queryPlanner": {"winningPlan": {"stage": "COLLSCAN"}},
                     "executionStats": {"totalDocsExamined": 10001}}},
        {"$group": {"_id": 1}}]})
    assert aggregated == ("COLLSCAN", 10001)
    assert plan_of({}) == ("?", None)
