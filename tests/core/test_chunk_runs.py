"""A summary's chunk lists as sorted runs (core/cohort/places.py): every add and
remove keeps the runs equal to the set they stand for, and a large cohort's
summary stays small."""

from __future__ import annotations

import itertools
import json
import random

from kinflow.core.cohort import places, tallies
from kinflow.core.state import Ref, ResolvedRow, SubworkflowEntry


def test_runs_follow_random_adds_and_removes_and_stay_joined() -> None:
    pick = random.Random(11)
    runs: list[places.Run] = []
    wanted: set[int] = set()
    for _ in range(3000):
        chunk = pick.randrange(60)
        if pick.random() < 0.6:
            places.add(runs, chunk)
            wanted.add(chunk)
        else:
            places.remove(runs, chunk)
            wanted.discard(chunk)
        assert list(places.expand(runs)) == sorted(wanted)
        spans = [places.bounds(run) for run in runs]
        assert all(a[1] + 1 < b[0] for a, b in itertools.pairwise(spans))  # joined, in order
        assert all(isinstance(r, int) or r[0] < r[1] for r in runs)
    assert list(places.expand(runs, 30)) == sorted(c for c in wanted if c >= 30)


def test_plain_numbers_written_before_runs_read_and_update_alike() -> None:
    older = [2, 3, 7]
    assert list(places.expand(older)) == [2, 3, 7]
    places.add(older, 4)
    places.remove(older, 7)
    assert list(places.expand(older)) == [2, 3, 4]


def _row(index: int, done: bool) -> SubworkflowEntry:
    return SubworkflowEntry.model_validate({
        "_key": f"k{index}", "activity": "a", "action": "go", "definition": "child",
        "stageEntry": "v1", "cohortStage": "s", "rowKey": f"r{index}",
        "ref": Ref.model_validate({"id": f"lake:d:c{index}", "type": "kinflow.instance"}),
        "spawnedAt": "2026-01-01T00:00:00Z", "queued": None if done else True,
        "resolved": ResolvedRow(at="2026-01-01T00:00:00Z") if done else None,
        "outcome": "succeeded" if done else None})


def test_a_large_cohorts_summary_keeps_a_few_runs_per_pair() -> None:
    rows = [_row(i, done=i < 60_000) for i in range(100_000)]
    summary = tallies.summarise(rows)
    chunks = summary[0]["chunks"]
    assert chunks == {"done:succeeded": [[0, 1874]], "queued:": [[1875, 3124]]}
    assert len(json.dumps(summary)) < 1024
