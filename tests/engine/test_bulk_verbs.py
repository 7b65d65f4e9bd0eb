"""``fireCohort`` and ``abortCohort`` against the embedded lake: selection,
exactly once per child under derived keys, per-child refusals,
interrupted calls finished by a retry or the heartbeat, and closing a cohort."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kinflow.core.cohort.registry import subworkflow_rows
from kinflow.core.cohort.selection import CohortFilter
from kinflow.core.context import Limits
from kinflow.core.errors import (
    CohortClosed,
    CohortNotFound,
    IdempotencyKeyReused,
    InjectedFault,
)
from kinflow.core.state import Instance
from kinflow.engine import Engine
from kinflow.errors import InvalidInput
from kinflow.groq import GroqSyntaxError
from kinflow.storage import Lake
from kinflow.worker import Worker
from tests.engine.bulk_defs import cohort_parent, nudgeable, records
from tests.engine.conftest import Clock
from tests.engine.invariants import assert_repaired

pytestmark = pytest.mark.lake


async def begin(engine: Engine, *names: str, max_active: int | None = None) -> Instance:
    await engine.deploy([cohort_parent(max_active=max_active), nudgeable()])
    started = await engine.start_instance("p", fields=records(*names))
    return (await engine.fire_action(started.instance.id_, "go", "go")).instance


def rows(instance: Instance) -> dict[str, dict[str, Any]]:
    return {r["rowKey"]: r for r in subworkflow_rows(instance, instance.open_entry())}


async def children(engine: Engine, parent_id: str) -> dict[str, dict[str, Any]]:
    """The parent's child documents by item."""
    found = await engine.lake.find({"parentInstance": parent_id})
    return {field(doc, "item"): doc for doc in found}


def field(doc: dict[str, Any], name: str) -> Any:
    return next(f["value"] for f in doc["fields"] if f["name"] == name)


def nudged(doc: dict[str, Any]) -> int:
    """How many times ``nudge`` fired on the child: its history and its counter agree."""
    fired = sum(1 for h in doc["history"]
                if h["_type"] == "actionFired" and h.get("action") == "nudge")
    assert fired == field(doc, "nudges")
    return fired


async def test_fire_cohort_applies_to_exactly_the_matching_rows_of_a_thousand(
        engine: Engine) -> None:
    # every fourth row's child ends at once (outputs.wordCount = its words), the rest live
    names = [f"d{i:03d}" if i % 4 == 0 else f"a{i:03d}" for i in range(1000)]
    p = await begin(engine, *names)
    statuses = [r["status"] for r in rows(await engine.get_instance(p.id_)).values()]
    assert (statuses.count("done"), statuses.count("active")) == (250, 750)

    by_status = CohortFilter(status=("active",), where="string::startsWith(rowKey, 'a1')")
    result = await engine.fire_cohort(p.id_, "translate", "task", "nudge", where=by_status,
                                      idempotency_key="nudge-a1")
    expected = {n for n in names if n.startswith("a1")}
    assert (result.matched, result.applied, result.skipped, result.refusals) == \
        (75, 75, 0, []) and len(expected) == 75
    docs = await children(engine, p.id_)
    assert {item for item, doc in docs.items() if nudged(doc)} == expected

    # a where over outputs selects finished rows only: matched, skipped, nobody fired on
    by_outputs = CohortFilter(where="outputs.wordCount > 900")
    finished = await engine.fire_cohort(p.id_, "translate", "task", "nudge",
                                        where=by_outputs)
    assert (finished.matched, finished.applied, finished.skipped) == (25, 0, 25)

    replay = await engine.fire_cohort(p.id_, "translate", "task", "nudge", where=by_status,
                                      idempotency_key="nudge-a1")
    assert (replay.matched, replay.applied, replay.skipped, replay.refusals) == (75, 0, 75, [])
    after = await children(engine, p.id_)
    assert {item for item, doc in after.items() if nudged(doc)} == expected
    assert all(nudged(doc) <= 1 for doc in after.values())
    parent = await engine.get_instance(p.id_)
    assert parent.owesBulk is None and parent.bulkCalls is None


async def test_a_child_whose_action_is_disabled_is_a_refusal_not_a_failure(
        engine: Engine) -> None:
    p = await begin(engine, "a1", "locked", "a2")
    result = await engine.fire_cohort(p.id_, "translate", "task", "nudge")
    assert (result.matched, result.applied, result.skipped) == (3, 2, 0)
    [refusal] = result.refusals
    locked = rows(await engine.get_instance(p.id_))["locked"]
    assert (refusal.row_key, refusal.child_id, refusal.code) == \
        ("locked", locked["_id"], "action-disabled")
    assert "filter-failed" in refusal.message
    docs = await children(engine, p.id_)
    assert {item: nudged(doc) for item, doc in docs.items()} == \
        {"a1": 1, "locked": 0, "a2": 1}


async def test_an_action_that_ends_the_child_fires_once_and_the_parent_learns_it(
        engine: Engine) -> None:
    p = await begin(engine, "a1", "a2", "a3")
    result = await engine.fire_cohort(p.id_, "translate", "task", "finish",
                                      where=CohortFilter(row_keys=("a1", "a3")),
                                      idempotency_key="finish")
    assert (result.matched, result.applied) == (2, 2)
    seen = rows(await engine.get_instance(p.id_))
    assert {k: r["status"] for k, r in seen.items()} == {"a1": "done", "a2": "active",
                                                         "a3": "done"}
    replay = await engine.fire_cohort(p.id_, "translate", "task", "finish",
                                      where=CohortFilter(row_keys=("a1", "a3")),
                                      idempotency_key="finish")
    assert (replay.applied, replay.skipped, replay.refusals) == (0, 2, [])
    await assert_repaired(engine)


async def test_a_child_fired_before_its_row_was_marked_is_not_fired_again(
        engine: Engine) -> None:
    """A crash between a child's commit and its batch's mark: the child's ledger holds the
    derived key, so the retried call finds it there and skips the row."""
    p = await begin(engine, "a1", "a2", "a3")
    child = rows(p)["a2"]["_id"]
    await engine.fire_action(child, "task", "nudge", idempotency_key="k:a2")
    result = await engine.fire_cohort(p.id_, "translate", "task", "nudge",
                                      idempotency_key="k")
    assert (result.matched, result.applied, result.skipped) == (3, 2, 1)
    docs = await children(engine, p.id_)
    assert all(nudged(doc) == 1 for doc in docs.values())


async def nudging_engine(lake: Lake, clock: Clock) -> tuple[Engine, list[str], Instance]:
    """An engine firing on two rows per batch, and a cohort of five live children."""
    engine = Engine(lake, clock=clock, limits=replace(Limits(), bulk_batch=2))
    await engine.ensure_ready()
    names = [f"a{i}" for i in range(5)]
    return engine, names, await begin(engine, *names)


async def test_an_interrupted_fire_is_finished_by_retrying_it_with_its_key(
        lake: Lake, clock: Clock) -> None:
    engine, names, p = await nudging_engine(lake, clock)
    engine.faults.arm("mid-bulk")
    with pytest.raises(InjectedFault):
        await engine.fire_cohort(p.id_, "translate", "task", "nudge", idempotency_key="half")
    half = await children(engine, p.id_)
    assert [nudged(half[n]) for n in names] == [1, 1, 0, 0, 0]  # one batch applied
    assert (await engine.get_instance(p.id_)).owesBulk

    rest = await engine.fire_cohort(p.id_, "translate", "task", "nudge",
                                    idempotency_key="half")
    assert (rest.matched, rest.applied, rest.skipped) == (5, 3, 2)
    final = await children(engine, p.id_)
    assert [nudged(final[n]) for n in names] == [1] * 5
    parent = await engine.get_instance(p.id_)
    assert parent.owesBulk is None and parent.bulkCalls is None

    with pytest.raises(IdempotencyKeyReused):  # the same key for another call
        await engine.fire_cohort(p.id_, "translate", "task", "finish", idempotency_key="half")


@pytest.mark.parametrize("key", ["beat", None])
async def test_an_interrupted_fire_is_finished_by_one_heartbeat(
        lake: Lake, clock: Clock, key: str | None) -> None:
    engine, names, p = await nudging_engine(lake, clock)
    engine.faults.arm("mid-bulk")
    with pytest.raises(InjectedFault):
        await engine.fire_cohort(p.id_, "translate", "task", "nudge", idempotency_key=key)
    cut = await engine.get_instance(p.id_)
    assert [c.op for c in cut.bulkCalls or []] == ["fireCohort"]

    report = await Worker(engine, grace_seconds=0).run_pass()
    assert ("bulk", p.id_) in report.processed and not report.failed
    final = await children(engine, p.id_)
    assert [nudged(final[n]) for n in names] == [1] * 5
    parent = await engine.get_instance(p.id_)
    assert parent.owesBulk is None and parent.bulkCalls is None
    await assert_repaired(engine)


async def test_abort_without_a_filter_closes_the_cohort(engine: Engine) -> None:
    p = await begin(engine, "a0", "a1", "a2", "a3", "a4", max_active=2)
    before = rows(p)
    assert [before[f"a{i}"]["status"] for i in range(5)] == ["active"] * 2 + ["queued"] * 3

    result = await engine.abort_cohort(p.id_, "translate", reason="stop the run",
                                       idempotency_key="close")
    assert (result.matched, result.applied, result.skipped, result.refusals) == (5, 5, 0, [])
    parent = await engine.get_instance(p.id_)
    seen = rows(parent)
    assert {k: (r["status"], r["outcome"]) for k, r in seen.items()} == \
        {f"a{i}": ("aborted", "aborted") for i in range(5)}
    assert all(r.abortReason == "cohort-aborted" for r in parent.subworkflows)
    docs = await children(engine, p.id_)
    assert set(docs) == {"a0", "a1"}  # the queued rows never got a child
    assert all(doc.get("abortedAt") for doc in docs.values())
    [setting] = parent.cohorts or []
    assert setting.closedAt and setting.closedBy == "abortCohort"
    assert [h["_type"] for h in parent.history].count("cohortClosed") == 1

    with pytest.raises(CohortClosed) as refused:
        await engine.fire_action(p.id_, "translate", "top-up")
    assert refused.value.code == "cohort-closed"
    assert len((await engine.get_instance(p.id_)).subworkflows) == 5
    replay = await engine.abort_cohort(p.id_, "translate", reason="stop the run",
                                       idempotency_key="close")
    assert (replay.matched, replay.applied, replay.skipped) == (5, 0, 5)
    await assert_repaired(engine)


async def test_abort_with_a_filter_leaves_the_cohort_open(engine: Engine) -> None:
    p = await begin(engine, "a0", "a1", "a2")
    result = await engine.abort_cohort(p.id_, "translate",
                                       where=CohortFilter(row_keys=("a1",)))
    assert (result.matched, result.applied) == (1, 1)
    await engine.fire_action(p.id_, "translate", "top-up")
    seen = rows(await engine.get_instance(p.id_))
    assert {k: r["status"] for k, r in seen.items()} == \
        {"a0": "active", "a1": "aborted", "a2": "active", "extra": "active"}
    await assert_repaired(engine)


async def test_refusals_of_the_whole_call_apply_nothing(engine: Engine) -> None:
    p = await begin(engine, "a0")
    with pytest.raises(CohortNotFound):  # an activity that never spawned
        await engine.fire_cohort(p.id_, "go", "task", "nudge")
    with pytest.raises(CohortNotFound):
        await engine.abort_cohort(p.id_, "edit")
    with pytest.raises(GroqSyntaxError):
        await engine.fire_cohort(p.id_, "translate", "task", "nudge",
                                 where=CohortFilter(where="outputs.("))
    with pytest.raises(InvalidInput):
        await engine.fire_cohort(p.id_, "translate", "task", "")
    docs = await children(engine, p.id_)
    assert nudged(docs["a0"]) == 0
    assert rows(await engine.get_instance(p.id_))["a0"]["status"] == "active"


async def test_cancel_without_a_filter_closes_the_cohort(engine: Engine) -> None:
    p = await begin(engine, "a0", "a1", "a2", "a3", max_active=2)
    result = await engine.cancel_cohort(p.id_, "translate", reason="not needed",
                                        idempotency_key="cancel-all")
    assert (result.matched, result.applied, result.skipped, result.refusals) == (4, 4, 0, [])
    parent = await engine.get_instance(p.id_)
    seen = rows(parent)
    assert {k: (r["status"], r["outcome"]) for k, r in seen.items()} == \
        {f"a{i}": ("cancelled", "cancelled") for i in range(4)}
    docs = await children(engine, p.id_)
    assert set(docs) == {"a0", "a1"}  # the queued rows never got a child
    assert all(doc.get("cancelledAt") and not doc.get("abortedAt") for doc in docs.values())
    [setting] = parent.cohorts or []
    assert setting.closedAt and setting.closedBy == "cancelCohort"
    with pytest.raises(CohortClosed):
        await engine.fire_action(p.id_, "translate", "top-up")
    replay = await engine.cancel_cohort(p.id_, "translate", reason="not needed",
                                        idempotency_key="cancel-all")
    assert (replay.matched, replay.applied, replay.skipped) == (4, 0, 4)
    await assert_repaired(engine)


async def test_cancel_with_a_filter_cancels_only_the_matching_children(engine: Engine) -> None:
    p = await begin(engine, "a0", "a1", "a2")
    result = await engine.cancel_cohort(p.id_, "translate",
                                        where=CohortFilter(row_keys=("a0", "a2")))
    assert (result.matched, result.applied) == (2, 2)
    parent = await engine.get_instance(p.id_)
    assert {k: r["status"] for k, r in rows(parent).items()} == \
        {"a0": "cancelled", "a1": "active", "a2": "cancelled"}
    assert not (parent.cohorts or []) or parent.cohorts[0].closedAt is None
    await assert_repaired(engine)


async def test_a_cancelled_row_redriven_gets_a_live_new_attempt(engine: Engine) -> None:
    """The new attempt must not inherit the old one's cancel request (the kill test found a
    redriven row skipped as cancelled in the very commit that made it, naming a child that
    was never created)."""
    p = await begin(engine, "a0", "a1")
    await engine.cancel_cohort(p.id_, "translate", where=CohortFilter(row_keys=("a0",)))
    result = await engine.redrive_cohort(p.id_, "translate",
                                         where=CohortFilter(row_keys=("a0",)))
    assert (result.matched, result.applied) == (1, 1)
    parent = await engine.get_instance(p.id_)
    [row] = [r for r in parent.subworkflows if r.rowKey == "a0"]
    assert (row.attempt, row.resolved, row.cancelPending) == (2, None, None)
    child = await engine.lake.get(row.child_id)
    assert child is not None and not child.get("cancelledAt") and not child.get("completedAt")
    assert rows(parent)["a0"]["status"] == "active"
    await assert_repaired(engine)
