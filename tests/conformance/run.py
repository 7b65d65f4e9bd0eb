"""Runs the GROQ conformance suite against kinflow.groq and reports per tier.

Usage: ``python -m tests.conformance.run --tiers 1,2,3 [--verbose]``. For each tier it
prints the failing cases, then a last line ``tier N: P passed, F failed``. The exit
status is 0 unless the suite is missing. Comparison rules: numbers compare as doubles,
JSON types strictly, ``_score`` values are replaced by their rank (``_pos``).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kinflow.groq import GroqError, evaluate, parse
from tests.conformance.suite import Case, Suite, cases_for_tier, suite_dir

FIXED_NOW = datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


@dataclass
class Outcome:
    case: Case
    passed: bool
    detail: str


def normalise(v: Any) -> Any:
    """Numbers as floats (JSON doubles), containers recursively; bools stay bools."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return float(v)
    if isinstance(v, float):
        return None if math.isnan(v) or math.isinf(v) else v
    if isinstance(v, (list, tuple)):
        return [normalise(x) for x in v]
    if isinstance(v, dict):
        return {str(k): normalise(x) for k, x in v.items()}
    return v


def _collect_scores(v: Any, out: set[float]) -> None:
    if isinstance(v, dict):
        for k, x in v.items():
            if k == "_score" and isinstance(x, (int, float)) and not isinstance(x, bool):
                out.add(float(x))
            else:
                _collect_scores(x, out)
    elif isinstance(v, list):
        for x in v:
            _collect_scores(x, out)


def _rank_scores(v: Any, ranks: dict[float, int]) -> Any:
    if isinstance(v, dict):
        return {("_pos" if k == "_score" else k):
                (ranks.get(float(x), x) if k == "_score" and isinstance(x, (int, float))
                 else _rank_scores(x, ranks)) for k, x in v.items()}
    if isinstance(v, list):
        return [_rank_scores(x, ranks) for x in v]
    return v


def scores_to_positions(v: Any) -> Any:
    scores: set[float] = set()
    _collect_scores(v, scores)
    if not scores:
        return v
    ranks = {s: i + 1 for i, s in enumerate(sorted(scores, reverse=True))}
    return _rank_scores(v, ranks)


def same(a: Any, b: Any) -> bool:
    """Strict JSON equality: a boolean never equals a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


class Runner:
    def __init__(self, suite: Suite) -> None:
        self.suite = suite
        self._datasets: dict[int, list[Any]] = {}
        self._results: dict[int, Outcome] = {}

    def dataset(self, case: Case) -> list[Any]:
        src = self.suite.generated.docs if case.dataset_kind == "generated" else case.documents
        key = id(src)
        got = self._datasets.get(key)
        if got is None:
            got = case.dataset(self.suite.generated.docs)
            self._datasets[key] = got
        return got

    def run(self, case: Case) -> Outcome:
        key = id(case)
        got = self._results.get(key)
        if got is None:
            got = self._run(case)
            self._results[key] = got
        return got

    def _run(self, case: Case) -> Outcome:
        params = case.params or {}
        try:
            tree = parse(case.query, params)
        except GroqError as exc:
            if not case.valid:
                return Outcome(case, True, "")
            return Outcome(case, False, f"parse error: {exc.message}")
        if not case.valid:
            return Outcome(case, False, "expected the query to be refused")
        try:
            actual = evaluate(tree, dataset=self.dataset(case), params=params, now=FIXED_NOW)
        except GroqError as exc:
            return Outcome(case, False, f"evaluation error: {exc.message}")
        got = normalise(scores_to_positions(actual))
        want = normalise(case.result)
        if same(got, want):
            return Outcome(case, True, "")
        return Outcome(case, False, f"expected {want!r}, got {got!r}")


def run_tier(runner: Runner, tier: int) -> list[Outcome]:
    return [runner.run(c) for c in cases_for_tier(runner.suite, tier)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tiers", default="1,2,3")
    ap.add_argument("--verbose", "-v", action="store_true", help="show why each case failed")
    args = ap.parse_args(argv)
    root = suite_dir()
    if root is None:
        print("GROQ test suite not found (tests/conformance/groq-test-suite, or set "
              "KINFLOW_GROQ_SUITE)", file=sys.stderr)
        return 2
    runner = Runner(Suite(root))
    for tier in (int(t) for t in args.tiers.split(",") if t.strip()):
        outcomes = run_tier(runner, tier)
        failed = [o for o in outcomes if not o.passed]
        for o in failed:
            line = f"FAIL [{o.case.filename}] {o.case.name}: {o.case.query.strip()}"
            print(line if not args.verbose else f"{line}\n    {o.detail}")
        passed = len(outcomes) - len(failed)
        print(f"tier {tier}: {passed} passed, {len(failed)} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
