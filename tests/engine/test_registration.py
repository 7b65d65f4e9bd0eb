"""Registration in batches (docs/subworkflows.md#registration-and-limits), on the embedded lake.

A windowed lake ``forEach`` registers its rows a batch per parent commit: the
first batch with the spawn (its rows start at once), the rest after it, in
``_id`` order, from the checkpoint on the parent's cohort setting.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from typing import Any

import pytest

from kinflow.core.cohort.registration import plan_register
from kinflow.core.context import Actor, BatchRequest
from kinflow.core.errors import InjectedFault, KinflowError
from kinflow.core.state import Instance
from kinflow.engine import Engine
from kinflow.engine.registration import read_batch
from kinflow.storage.lake import Lake
from kinflow.worker import Worker
from tests.engine.cohort_defs import WAITING, parent, with_item, with_window
from tests.engine.cohort_defs import child as child_def

pytestmark = pytest.mark.lake

BATCH = 5


def lake_parent(max_active: int | None = 3, for_each: str = "*[_type == 'item']{_id}"
                ) -> dict[str, Any]:
    definition = with_item(parent(for_each, settled=WAITING), "$row._id")
    return definition if max_active is None else with_window(definition, max_active)


def batched(engine: Engine, **limits: Any) -> Engine:
    return Engine(engine.lake, clock=engine.clock, limits=dataclasses.replace(
        engine.limits, registration_batch=BATCH, **limits))


async def put_items(engine: Engine, names: list[str], **extra: Any) -> None:
    for name in names:
        await engine.lake.create({"_id": name, "_type": "item", **extra})


async def spawned(engine: Engine, names: list[str], *, others: int = 0,
                  max_active: int | None = 3) -> Instance:
    await engine.ensure_ready()
    await engine.deploy([lake_parent(max_active), child_def()])
    await put_items(engine, names)
    for n in range(others):  # documents the query does not match, between the items
        await engine.lake.create({"_id": f"item-{n:02d}x", "_type": "other"})
    started = await engine.start_instance("p")
    return (await engine.fire_action(started.instance.id_, "go", "go")).instance


def setting(p: Instance) -> Any:
    return next(c for c in p.cohorts or [] if c.activity == "translate")


NAMES = [f"item-{n:02d}" for n in range(23)]


async def test_a_windowed_lake_cohort_registers_in_batches_in_id_order(engine: Engine) -> None:
    engine = batched(engine)
    engine.faults.arm("mid-registration")  # hold the background: see the first batch alone
    p = await spawned(engine, list(reversed(NAMES)), others=4)
    assert [r.rowKey for r in p.subworkflows] == NAMES[:BATCH]
    assert [bool(r.queued) for r in p.subworkflows] == [False] * 3 + [True] * 2
    point = setting(p).registration
    assert point is not None and point["after"] == NAMES[BATCH - 1] and point["rows"] == BATCH
    assert p.owesRegistration is True
    await engine.registrar.idle()
    assert await engine.maintenance.finish_registration(p.id_) >= 3  # 18 rows left, 5 a batch
    p = await engine.get_instance(p.id_)
    assert [r.rowKey for r in p.subworkflows] == NAMES
    assert setting(p).registration is None and p.owesRegistration is None
    assert sum(1 for r in p.subworkflows if not r.queued) == 3  # the window holds


async def test_the_rest_registers_in_the_background_of_the_spawning_process(
        engine: Engine) -> None:
    engine = batched(engine)
    p = await spawned(engine, NAMES)
    await engine.registrar.idle()
    p = await engine.get_instance(p.id_)
    assert [r.rowKey for r in p.subworkflows] == NAMES
    assert p.owesRegistration is None and p.currentStage == "review"


async def test_documents_created_after_the_spawn_are_not_members(engine: Engine) -> None:
    engine = batched(engine)
    engine.faults.arm("mid-registration")
    p = await spawned(engine, NAMES)
    await engine.registrar.idle()
    await put_items(engine, ["item-05a", "item-99"])  # created after the spawn
    await engine.lake.patch("item-20", {"$set": {"_type": "gone"}})  # changed: read as it is
    await engine.maintenance.finish_registration(p.id_)
    p = await engine.get_instance(p.id_)
    assert [r.rowKey for r in p.subworkflows] == [n for n in NAMES if n != "item-20"]


async def test_a_crash_between_batches_resumes_from_the_checkpoint_on_the_heartbeat(
        engine: Engine) -> None:
    engine = batched(engine)
    engine.faults.arm("mid-registration")
    p = await spawned(engine, NAMES)
    await engine.registrar.idle()
    worker = Worker(engine, grace_seconds=0)
    report = await worker.run_pass()
    assert report.of("register") == [p.id_]
    p = await engine.get_instance(p.id_)
    keys = [r.rowKey for r in p.subworkflows]
    assert keys == NAMES and len(set(keys)) == len(keys)


async def test_two_registrars_never_register_a_row_twice(engine: Engine) -> None:
    engine = batched(engine)
    engine.faults.arm("mid-registration")
    p = await spawned(engine, NAMES)
    await engine.registrar.idle()
    other = batched(engine)
    import asyncio

    await asyncio.gather(engine.maintenance.finish_registration(p.id_),
                         other.maintenance.finish_registration(p.id_))
    p = await engine.get_instance(p.id_)
    assert [r.rowKey for r in p.subworkflows] == NAMES


async def test_a_cohort_without_a_window_is_refused_past_max_active_children(
        engine: Engine) -> None:
    small = batched(engine, max_active_children=4)
    with pytest.raises(KinflowError) as refused:
        await spawned(small, NAMES[:5], max_active=None)
    assert refused.value.code == "fan-out-limit"
    assert refused.value.details["reason"] == "no-window"


async def test_registration_past_the_fan_out_limit_is_refused(engine: Engine) -> None:
    small = batched(engine, fan_out=7)
    small.faults.arm("mid-registration")
    p = await spawned(small, NAMES)
    await small.registrar.idle()
    with pytest.raises(KinflowError) as refused:
        await small.maintenance.finish_registration(p.id_)
    assert refused.value.code == "fan-out-limit"
    p = await small.get_instance(p.id_)
    assert len(p.subworkflows) == BATCH  # the refused batch wrote nothing


async def test_a_crash_mid_spawn_registers_nothing(engine: Engine) -> None:
    engine = batched(engine)
    engine.faults.arm("before-spawn-commit")
    with pytest.raises(InjectedFault):
        await spawned(engine, NAMES)


async def test_the_commit_that_ends_registration_evaluates_the_gates(engine: Engine) -> None:
    """Every child finished at creation: nothing but the last batch's commit can move it."""
    from tests.engine.cohort_defs import child as make_child

    engine = batched(engine)
    definition = lake_parent()
    for stage in definition["stages"]:
        for activity in stage.get("activities") or []:
            for action in activity["actions"]:
                if action["name"] == "all-done":
                    action["when"] = "$cohort.settled"
    engine.faults.arm("mid-registration")
    await engine.ensure_ready()
    await engine.deploy([definition, make_child(auto=True)])
    await put_items(engine, NAMES)
    started = await engine.start_instance("p")
    p = (await engine.fire_action(started.instance.id_, "go", "go")).instance
    assert p.currentStage == "review" and p.owesRegistration
    await engine.registrar.idle()
    await engine.maintenance.finish_registration(p.id_)
    await engine.driver.propagator.idle()
    p = await engine.get_instance(p.id_)
    assert len(p.subworkflows) == len(NAMES) and p.currentStage == "next"


async def finishing_at_creation(engine: Engine, gate: str) -> tuple[Engine, Instance]:
    """A parent spawning 290 children that finish at creation, 50 at a time, its rows
    registered 40 a batch, its gate ``gate``; the batches after the spawn's are left to
    the test, which commits each itself."""
    engine = Engine(engine.lake, clock=engine.clock,
                    limits=dataclasses.replace(engine.limits, registration_batch=40))
    definition = with_window(with_item(parent("*[_type == 'item']{_id}",
                                              settled=gate), "$row._id"), 50)
    engine.faults.arm("mid-registration", times=1_000)  # the test commits each batch itself
    await engine.ensure_ready()
    await engine.deploy([definition, child_def(auto=True)])
    await put_items(engine, [f"item-{n:03d}" for n in range(290)])
    started = await engine.start_instance("p")
    p = (await engine.fire_action(started.instance.id_, "go", "go")).instance
    await engine.registrar.idle()
    return engine, p


async def test_the_commit_that_registers_the_last_rows_ends_registration_and_moves_the_parent(
        engine: Engine) -> None:
    """A few hundred children that finish at creation, a window smaller than the cohort
    and no heartbeat: each registration commit registers rows, and the one that registers
    the last of them also finds there are no more, so the parent leaves its fan-out stage
    in that commit (no commit of empty key ranges after it)."""
    engine, p = await finishing_at_creation(engine, "$cohort.settled")
    registered = [len(p.subworkflows)]
    while p.owesRegistration:
        assert p.currentStage == "review"
        p = (await engine.transact.commit(p.id_, plan_register, verb="registerRows",
                                          actor=Actor.system())).instance
        registered.append(len(p.subworkflows))
    assert all(after > before for before, after in itertools.pairwise(registered))
    assert registered[-1] == 290 and len(registered) > 3
    p = await engine.get_instance(p.id_)
    assert p.currentStage == "next" and p.owesRegistration is None
    assert all(row.outcome == "succeeded" for row in p.subworkflows)


class DecodedReads(Lake):
    """The engine's lake, counting the documents its range reads return (each one the lake
    decoded for the read)."""

    decoded = 0

    async def find(self, filter_: Mapping[str, Any], **options: Any) -> list[dict[str, Any]]:
        found = await super().find(filter_, **options)
        if isinstance(filter_.get("_id"), dict):  # a range after the last batch's key
            self.decoded += len(found)
        return found


async def test_batches_over_decimal_ids_read_each_document_at_most_about_twice(
        engine: Engine) -> None:
    """Over ids whose digits carry (``item-0099`` then ``item-0100``), the key ranges of the
    batches after the first hold about a batch each, but at a carry: a range that grew 16x
    at once held ten batches' documents, and each batch after it read the rest of them
    again (five reads per document in all)."""
    lake = DecodedReads(engine.lake.client, engine.lake.database)
    await engine.ensure_ready()
    names = [f"item-{n:04d}" for n in range(1000)]  # a carry every 10 batches
    await engine.lake.collection().insert_many(
        [{"_id": name, "_type": "item"} for name in names])
    request = BatchRequest("*[_type == 'item']{_id}", {}, None, None, 10)
    rows: list[str] = []
    while True:
        batch = await read_batch(lake, "production", request, engine.clock())
        rows += [row["_id"] for row in batch.rows]
        if batch.done:
            break
        request = BatchRequest(request.query, {}, batch.last, batch.at, 10, batch.scale)
    assert rows == names
    assert lake.decoded <= 2 * len(names)  # 5 times as many before


async def test_batches_over_numbered_ids_read_each_document_once(engine: Engine) -> None:
    """Over ids ending in a decimal number (``item-00001``, a carry of a digit every ten
    batches), each batch's ranges span numbers, not key units: every document is read
    once, besides the one a full batch peeks at past itself, and a batch costs the lake a
    range read and its peek (the key unit ranges read some documents twice, and probed
    their way across each carry)."""
    lake = DecodedReads(engine.lake.client, engine.lake.database)
    await engine.ensure_ready()
    names = [f"item-{n:05d}" for n in range(3000)]
    await engine.lake.collection().insert_many(
        [{"_id": name, "_type": "item"} for name in names])
    request = BatchRequest("*[_type == 'item']{_id}", {}, None, None, 100)
    rows: list[str] = []
    batches = 0
    while True:
        before = lake.decoded
        batch = await read_batch(lake, "production", request, engine.clock())
        rows += [row["_id"] for row in batch.rows]
        batches += 1
        if batch.done:
            break
        if request.after is not None:  # a batch after the first: its range and its peek
            assert lake.decoded - before == 101
        request = BatchRequest(request.query, {}, batch.last, batch.at, 100, batch.scale)
    assert rows == names and batches == 30
    assert lake.decoded <= len(names) - 100 + 30  # 1.4 times as many before


async def test_numbered_ranges_cover_every_key_between_numbers(engine: Engine) -> None:
    """A numbered range is a range of text: keys between two numbers (``item-007a``), keys
    past the run's widest number and keys not numbered at all are read, in ``_id`` order."""
    await engine.ensure_ready()
    names = sorted([f"item-{n:03d}" for n in range(0, 40, 3)]
                   + ["item-007a", "item-012-x", "item-999", "item-9999", "item-a", "itemz"])
    await engine.lake.collection().insert_many(
        [{"_id": name, "_type": "item"} for name in names])
    request = BatchRequest("*[_type == 'item']{_id}", {}, None, None, 4)
    rows: list[str] = []
    while True:
        batch = await read_batch(engine.lake, "production", request, engine.clock())
        rows += [row["_id"] for row in batch.rows]
        if batch.done:
            break
        request = BatchRequest(request.query, {}, batch.last, batch.at, 4, batch.scale)
    assert rows == names


async def test_a_registration_commit_evaluates_the_gates_as_a_tick_would(engine: Engine) -> None:
    """Children that finish at creation: a registration commit whose rows make a gate hold
    moves the parent itself, before the rest is registered, and leaves no tick owed (a
    heartbeat tick on the parent would conflict with the next batch's commit)."""
    engine, p = await finishing_at_creation(engine, "$cohort.done >= 120")
    p = (await engine.transact.commit(p.id_, plan_register, verb="registerRows",
                                      actor=Actor.system())).instance
    assert len(p.subworkflows) == 80 and p.currentStage == "review"
    assert p.nextEvaluationAt is None  # its gate was evaluated: no tick is owed
    p = (await engine.transact.commit(p.id_, plan_register, verb="registerRows",
                                      actor=Actor.system())).instance
    assert len(p.subworkflows) == 120 and p.currentStage == "next"
