"""Tier 1 of the GROQ conformance suite inside ``make test``: fails under 99.5 %."""

from __future__ import annotations

import pytest

from tests.conformance.run import Runner, run_tier
from tests.conformance.suite import Suite, suite_dir

THRESHOLD = 0.995
TIER1_CASES = 4626


@pytest.fixture(scope="module")
def runner() -> Runner:
    root = suite_dir()
    assert root is not None, "the vendored GROQ suite is missing: tests/conformance/groq-test-suite"
    return Runner(Suite(root))


def test_tier1_case_count_matches_the_upstream_build(runner: Runner) -> None:
    assert len(run_tier(runner, 1)) == TIER1_CASES


def test_tier1_pass_rate(runner: Runner) -> None:
    outcomes = run_tier(runner, 1)
    failed = [o for o in outcomes if not o.passed]
    rate = 1 - len(failed) / len(outcomes)
    report = "\n".join(f"[{o.case.filename}] {o.case.name}: {o.case.query.strip()}\n  {o.detail}"
                       for o in failed[:40])
    assert rate >= THRESHOLD, f"tier 1 pass rate {rate:.4f} < {THRESHOLD}\n{report}"
