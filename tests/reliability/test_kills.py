"""Process kills: a driver doing real engine work is SIGKILLed at random moments.

Short form (``make test``): 10 kills on a 4 x 3 x 2 tree (4 live releases,
3 reviews each, 2 translations per review), scaled down so the suite stays
fast. Long form (``make soak``): 200 kills on 20 x 5 x 3. After every kill
the heartbeat runs until nothing is owed and the checker asserts every
invariant (tests/reliability/invariants.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.family import Shape
from tests.reliability.figures import record
from tests.reliability.kills import KillReport, run_kills

pytestmark = pytest.mark.lake


NEW_POINTS = ("before-cancel-children", "before-cancel-stamp", "mid-bulk")
"""The commit boundaries of cancellation and bulk calls."""


def _summary(label: str, report: KillReport) -> str:
    points = ", ".join(f"{p} {report.at_points[p]}/{n}" for p, n in sorted(report.armed.items()))
    kinds = ", ".join(f"{k} {n}" for k, n in report.ops.most_common())
    audit = report.audit
    return (f"{label}: {report.kills} kills ({report.exited_early} driver runs ended first), "
            f"at fault points (killed/armed): {points}; {report.operations} driver operations "
            f"({kinds}), {report.retries} cut operations retried with their key, "
            f"{audit.bulk_fires} children fired by a bulk call, {audit.cleanups} cleanups run "
            f"({audit.cleanups_rerun} again after a kill), {report.repaired_items} items "
            f"repaired, {report.instances} instances, {report.ledger.checks} invariant checks "
            f"in {report.ledger.rounds} rounds, 0 violations")


def _issue_16_ran(report: KillReport) -> None:
    """The run exercised cancellations and bulk calls, not only the older verbs."""
    assert report.ops["cancel"] > 0, report.ops
    assert sum(report.ops[k] for k in ("fireCohort", "abortCohort", "cancelCohort")) > 0


async def test_ten_kills_leave_every_invariant_intact(tmp_path: Path, seed: int) -> None:
    report = await run_kills(tmp_path / "lake", kills=10, shape=Shape(4, 3, 2), seed=seed)
    record("kills-short", _summary("short kills", report))
    assert report.kills + report.exited_early == 10
    assert report.kills >= 8, "the driver should still be working when most kills land"
    assert report.ledger.rounds == 10
    _issue_16_ran(report)


@pytest.mark.slow
@pytest.mark.timeout(3600)
async def test_two_hundred_kills_leave_every_invariant_intact(tmp_path: Path, seed: int) -> None:
    report = await run_kills(tmp_path / "lake", kills=200, shape=Shape(20, 5, 3), seed=seed,
                             max_delay=2.0)
    record("kills-soak", _summary("soak kills", report))
    assert report.kills >= 190
    assert report.ledger.rounds == 200
    _issue_16_ran(report)
    assert all(report.at_points[p] > 0 for p in NEW_POINTS), report.at_points
    assert report.retries > 0 and report.audit.cleanups > 0
