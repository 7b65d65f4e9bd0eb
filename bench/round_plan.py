"""What one propagation round costs the planner on a large windowed cohort (pure, no lake).

A windowed cohort needs a parent round per few dozen finished children (each
round stamps them and starts the next queued rows), so the round's plan is
paid hundreds of times per cohort and sits on the window's refill path. This
bench builds the parent of ``bench/cohort_api.py --max-active`` in memory
(``bench-parent`` with ``maxActive``, N rows), then plans ``--rounds`` rounds
with ``verbs.plan_hop``, each observing ``--finished`` of the live children
done, and prints the plan's milliseconds per round (median and max), as the
API process pays it (in its planning thread, without the lake).

    python bench/round_plan.py [--rows 10000] [--max-active 100] [--finished 50]
                               [--rounds 20] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import pstats
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _cohort_definitions import CHILD, windowed_parent

from kinflow.core import verbs
from kinflow.core.cohort.observe import Observation, live_rows
from kinflow.core.context import Actor, NeedsRowBatch, PlanContext, RowBatch, query_key
from kinflow.core.state import Instance
from kinflow.define.expand import expand_definition
from kinflow.define.models import WorkflowDefinition

START = datetime(2026, 1, 1, tzinfo=UTC)


def stored(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` as the lake holds it once deployed (version 1)."""
    body = WorkflowDefinition.model_validate(expand_definition(raw)).to_json()
    return {"_id": f"definition.{body['name']}.v1", "version": 1, "contentHash": "h", **body}


class Contexts:
    """Plan contexts a second apart, with the child deployed and the items' query answered."""

    def __init__(self, rows: int) -> None:
        child = stored(CHILD)
        self.definitions: dict[tuple[str, int | None], dict[str, Any] | None] = {
            (CHILD["name"], None): child, (CHILD["name"], 1): child}
        query = windowed_parent(1)["stages"][0]["activities"][0]["actions"][0]["spawn"][
            "forEach"]
        self.results: dict[str, Any] = {
            query_key(query, {}): [f"bench-item.{i}" for i in range(rows)]}
        self.keys = itertools.count()
        self.moments = itertools.count()

    def next(self) -> PlanContext:
        return PlanContext(
            now=START + timedelta(seconds=next(self.moments)), actor=Actor.system(),
            dataset="production", query_results=self.results, definitions=self.definitions,
            new_key=lambda: f"k{next(self.keys)}", new_token=lambda: f"t{next(self.keys)}")


def spawned(rows: int, max_active: int, contexts: Contexts) -> Instance:
    """The parent after its spawn, every row registered in the spawn's one batch."""
    verb = verbs.StartInstance(stored(windowed_parent(max_active)), {}, "instance.parent")
    while True:
        try:
            return verbs.plan_start(verb, contexts.next()).instance
        except NeedsRowBatch as need:  # a windowed forEach registers in batches
            items = contexts.results[query_key(need.request.query, need.request.params)]
            contexts.results[need.cache_key] = RowBatch(
                rows=list(items), last=items[-1] if items else None, done=True,
                at=START.isoformat())


def rounds(parent: Instance, contexts: Contexts, finished: int, count: int) -> list[float]:
    """Plan ``count`` rounds, each stamping ``finished`` live children done."""
    took: list[float] = []
    for _ in range(count):
        ctx = contexts.next()
        seen = [Observation(row.child_id, "done", "done", ctx.now_iso)
                for row in live_rows(parent)[:finished]]
        began = time.perf_counter()
        parent = verbs.plan_hop(parent, ctx, seen).instance
        took.append((time.perf_counter() - began) * 1000)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--max-active", type=int, default=100)
    parser.add_argument("--finished", type=int, default=50, help="children done per round")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top 25")
    args = parser.parse_args()
    contexts = Contexts(args.rows)
    parent = spawned(args.rows, args.max_active, contexts)
    rounds(parent, contexts, args.finished, 2)  # warm the caches a served process has warm
    profile = cProfile.Profile() if args.profile else None
    if profile is not None:
        profile.enable()
    took = rounds(parent, contexts, args.finished, args.rounds)
    if profile is not None:
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
    print(f"{args.rows:,} rows, maxActive {args.max_active}, {args.finished} finished per "
          f"round: plan median {statistics.median(took):.1f} ms, max {max(took):.1f} ms "
          f"over {len(took)} rounds")


if __name__ == "__main__":
    main()
