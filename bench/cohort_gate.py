"""What a gate on ``$cohort`` costs on a large cohort's parent (pure, no lake).

Builds a parent in memory whose open visit spawned ``--rows`` rows (the
registry rows and the per-cohort summary the lake would hold,
``Instance.cohortRows``), then evaluates conditions the way a hop does: a
fresh ``Renderer`` per check (the engine builds one per gate), the condition
checked against the bound variables. Prints the median and the 99th
percentile milliseconds per check (and the 99th percentile of CPU time, which a
loaded machine's scheduling does not inflate) for:

* ``$cohorts.translate.settled`` in a transition's ``when``;
* ``$cohort.settled`` in an action's ``when`` of the spawning activity;
* the same inside a commit that has just stamped ``--changed`` rows (the
  summary corrected by the replaced rows, core/cohort/counts.py).

The built rows are frozen out of the garbage collector (``gc.freeze``): without
it the p99 is a full collection over 100,000 row objects (10-20 ms on a loaded
machine), which any process holding them pays whatever it evaluates.

    python bench/cohort_gate.py [--rows 100000] [--changed 50] [--checks 1000]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kinflow.core import verbs
from kinflow.core.cohort import chunks, tallies
from kinflow.core.conditions import Renderer
from kinflow.core.context import Actor, PlanContext
from kinflow.core.state import Instance, ResolvedRow, SubworkflowEntry
from kinflow.define import sites
from kinflow.define.expand import expand_definition
from kinflow.define.models import WorkflowDefinition
from kinflow.timestamps import iso

AT = "2026-01-01T00:00:00.000Z"


def parent_definition() -> dict[str, Any]:
    spawn = {"forEach": "[]", "definition": {"name": "c"}, "maxActive": 200}
    return {"name": "p", "title": "P", "initialStage": "review", "fields": [], "stages": [
        {"name": "review", "activities": [{"name": "translate", "actions": [
            {"name": "fan", "spawn": spawn},
            {"name": "all-done", "when": "$cohort.settled", "status": "done"}]}],
         "transitions": [{"name": "to-done", "to": "done",
                          "when": "$cohorts.translate.settled"}]},
        {"name": "done"}]}


def context() -> PlanContext:
    from datetime import UTC, datetime
    keys = iter(range(10**9))
    return PlanContext(now=datetime(2026, 1, 1, tzinfo=UTC), actor=Actor.system(),
                       dataset="production", new_key=lambda: f"k{next(keys)}",
                       new_token=lambda: f"t{next(keys)}")


def built(rows: int) -> Instance:
    raw = parent_definition()
    body = WorkflowDefinition.model_validate(expand_definition(raw)).to_json()
    stored = {"_id": "definition.p.v1", "version": 1, "contentHash": "h", **body}
    instance = verbs.plan_start(verbs.StartInstance(stored, None, "instance.p"),
                                context()).instance
    visit = instance.open_entry()
    assert visit is not None
    done = ResolvedRow(at=AT, stage="done")
    made = [SubworkflowEntry.model_validate({
        "_key": f"k{i}", "activity": "translate", "action": "fan", "definition": "c",
        "stageEntry": visit.key_, "cohortStage": "review", "rowKey": f"r{i}",
        "ref": {"id": f"lake:production:c-{i}"}, "spawnedAt": AT}).model_copy(
            update={"resolved": done, "outcome": "succeeded"} if i % 4 else {"queued": True})
        for i in range(rows)]
    instance.subworkflows = made
    instance.cohortRows = tallies.summarise(made)
    instance.rowCount = rows
    return instance


def timed(instance: Instance, text: str, site: sites.Site, activity: str | None,
          checks: int) -> tuple[float, float, float, Any]:
    """Median and p99 wall milliseconds per check, p99 CPU milliseconds, and the value."""
    definition = instance.definition_model()
    ctx = context()
    wall: list[float] = []
    cpu: list[float] = []
    verdict = None
    for _ in range(checks):
        began, began_cpu = time.perf_counter(), time.process_time()
        verdict = Renderer(instance, definition, ctx).check(text, site, activity)
        wall.append((time.perf_counter() - began) * 1000)
        cpu.append((time.process_time() - began_cpu) * 1000)
    wall.sort()
    cpu.sort()
    p99 = int(len(wall) * 0.99) - 1
    return (statistics.median(wall), wall[p99], cpu[p99],
            verdict.value if verdict else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changed", type=int, default=50)
    parser.add_argument("--checks", type=int, default=1000)
    args = parser.parse_args()
    began = time.perf_counter()
    instance = built(args.rows)
    # the rows are long-lived (the process keeps its parents): a full collection walking
    # them is the collector's cost, whenever it falls, not the gate's
    gc.freeze()
    print(f"parent with {args.rows:,} rows built in {time.perf_counter() - began:.1f} s; "
          f"summary {len(str(instance.cohortRows)):,} bytes; {iso_now()}")
    cases = [("$cohorts.translate.settled", sites.TRANSITION_WHEN, None, "transition"),
             ("$cohort.settled", sites.TRIGGER_WHEN, "translate", "action when")]
    print("| check | median ms | p99 ms | p99 CPU ms | value |\n|---|---|---|---|---|")
    for text, site, activity, where in cases:
        median, worst, cpu, value = timed(instance, text, site, activity, args.checks)
        print(f"| `{text}` ({where}) | {median:.3f} | {worst:.3f} | {cpu:.3f} | {value} |")
    for i in range(0, args.changed * 4, 4):  # queued rows started: a commit's changes
        chunks.replace_row(instance, i, queued=None)
    median, worst, cpu, value = timed(instance, "$cohort.settled", sites.TRIGGER_WHEN,
                                      "translate", args.checks)
    print(f"| `$cohort.settled` after {args.changed} rows changed in the commit | "
          f"{median:.3f} | {worst:.3f} | {cpu:.3f} | {value} |")


def iso_now() -> str:
    from datetime import UTC, datetime
    return iso(datetime.now(UTC))


if __name__ == "__main__":
    main()
