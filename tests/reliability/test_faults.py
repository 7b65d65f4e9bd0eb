"""Faults on the wire: engine processes reach the lake only through the fault proxy.

Short form (``make test``): two engine drivers for 20 s on a 3 x 2 x 2 tree with
about two faults a second (connection resets mid-transaction, delays, a
blackhole of a few seconds). Long form (``make soak``): ten minutes of
faulted load with at least 200 faults. Either way every fault must surface as
a typed refusal or not at all (no ``internal-error``, no driver crash), and
after the heartbeat the checker finds no lost or doubled child and every
keyed call applied once (tests/reliability/faults.py). A third test puts
``kinflow serve`` behind the proxy: its GraphQL clients may see only retryable
codes (tests/reliability/api_faults.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.reliability.api_faults import run_api_faults
from tests.reliability.family import Shape
from tests.reliability.fault_proxy import FaultPlan, injected
from tests.reliability.faults import RETRYABLE, FaultReport, run_faults
from tests.reliability.figures import record

pytestmark = [
    pytest.mark.lake,
    pytest.mark.skipif(bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")),
                       reason="embedded lake only"),
]


def _held(report: FaultReport) -> None:
    assert report.refused.get("internal-error", 0) == 0, report.refused
    assert report.faults["reset:request-lost"] + report.faults["reset:reply-lost"] > 0
    assert report.faults["reset-in-transaction"] > 0, report.faults
    assert report.ops["fire"] + report.ops["fireCohort"] > 0, report.ops


async def test_faults_on_the_wire_keep_every_invariant(tmp_path: Path, seed: int) -> None:
    report = await run_faults(tmp_path / "lake", seconds=20, round_seconds=10,
                              shape=Shape(3, 2, 2), seed=seed,
                              plan=FaultPlan(rate=2.0, blackhole=(1.0, 2.0)))
    record("faults-short", report.summary("short faults"))
    _held(report)
    assert report.injected >= 15, report.faults


async def test_api_clients_see_faults_only_as_retryable_refusals(tmp_path: Path,
                                                                 seed: int) -> None:
    """``kinflow serve`` (with its worker) behind the proxy: GraphQL clients are refused
    only with retryable codes, nothing acknowledged is lost, nothing runs twice."""
    run = await run_api_faults(tmp_path / "api", seconds=20, clients=3, seed=seed,
                               plan=FaultPlan(rate=2.0, blackhole=(1.0, 2.0)))
    faults = dict(sorted(run.faults.items()))
    record("faults-api", f"API behind the fault proxy: {injected(faults)} faults {faults}; "
                         f"{run.tally.summary()}; checks {run.figures}")
    assert set(run.tally.codes) <= RETRYABLE | {"action-disabled"}, run.tally.codes
    assert "internal-error" not in run.tally.watch_errors, run.tally.watch_errors
    assert not run.internal_logged, "the API logged an internal error"
    assert run.tally.shipped, "no order shipped"
    assert run.faults["reset:request-lost"] + run.faults["reset:reply-lost"] > 0, faults


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_fault_proxy_soak(tmp_path: Path, seed: int) -> None:
    report = await run_faults(tmp_path / "lake", seconds=600, round_seconds=60,
                              shape=Shape(10, 4, 3), seed=seed, plan=FaultPlan(rate=0.6))
    line = report.summary("fault soak")
    record("faults-soak", line)
    print(line)
    _held(report)
    assert report.injected >= 200, report.faults
    assert report.faults["blackhole"] > 0, report.faults
