"""Admission on a sparse parent without walking its rows, on the embedded lake: rows load
sparse from 64 on and a commit may read at most 3 chunks of the 7, so a fill that walked
every row would be refused (``registry-too-large``) instead of passing.

docs/subworkflows.md#large-parents-without-their-rows-in-memory
"""

from __future__ import annotations

from typing import Any

import pytest

from kinflow.core.cohort import sparse, tallies
from kinflow.engine import Engine
from tests.engine.cohort_defs import child, parent, with_item, with_window
from tests.engine.test_sparse_registry import ROWS, SETTLED, beat, live_children, sparse_engine

pytestmark = pytest.mark.lake

BOUND = 3
WINDOW = 6
NAMES = [f"item-{n:03d}" for n in range(ROWS)]


def tier(n: int) -> int:
    """Gold rows (every seventh, in every chunk) start before the others."""
    return 1 if n % 7 == 3 else 0


EXPECTED = sorted(range(ROWS), key=lambda n: (-tier(n), n))  # highest first, then in order


def prioritised() -> dict[str, Any]:
    made = with_window(with_item(parent("*[_type == 'item']{_id, tier}", settled=SETTLED),
                                 "$row._id"), WINDOW)
    spawn = made["stages"][1]["activities"][0]["actions"][0]["spawn"]
    spawn["priority"] = "$row.tier"
    return made


async def started_rows(engine: Engine, parent_id: str) -> set[int]:
    found = await engine.lake.find({"_type": "kinflow.instance", "parentInstance": parent_id})
    return {int(doc["rowPlace"]) for doc in found}


async def test_priority_admission_reads_a_few_chunks_per_commit(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse, "KEPT_CHUNKS", 2)  # of 7: the kept state does not hold them
    engine = sparse_engine(engine, chunks=BOUND)  # a fill that sorted every row is refused
    await engine.deploy([prioritised(), child()])
    for n, name in enumerate(NAMES):
        await engine.lake.create({"_id": name, "_type": "item", "tier": tier(n)})
    p = await engine.start_instance("p")
    pid = p.instance.id_
    await engine.fire_action(pid, "go", "go")
    await engine.registrar.idle()
    while (await engine.maintenance.finish_registration(pid)) > 0:
        pass
    stored = await engine.document(pid)
    assert stored is not None and stored["rowCount"] == ROWS and stored["historyCount"]
    entry = tallies.find(stored["cohortRows"], "translate", None)
    assert entry is not None and set(entry[tallies.PRIORITIES]) == {"1.0", "0.0"}
    for _ in range(ROWS):
        await engine.driver.propagator.idle()
        if (await engine.document(pid) or {}).get("currentStage") == "next":
            break
        done = await started_rows(engine, pid)
        assert done == set(EXPECTED[:len(done)])  # every start took the highest waiting row
        live = await live_children(engine, pid)
        if not live:  # the bound cut a fill short: the heartbeat goes on
            await beat(engine)
            continue
        for child_id in live:
            await engine.fire_action(child_id, "task", "finish")
    else:
        raise AssertionError("the cohort did not settle")
    p2 = await engine.get_instance(pid)
    assert all(r.resolved is not None and r.outcome == "succeeded" for r in p2.subworkflows)
    stored = await engine.document(pid)
    assert stored is not None
    entry = tallies.find(stored["cohortRows"], "translate", None)
    assert entry is not None and entry[tallies.PRIORITIES] == {}
