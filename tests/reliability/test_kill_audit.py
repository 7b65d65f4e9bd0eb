"""The kill test's issue-16 checks are not vacuous: each damage they exist for makes them fail.

On a booking whose holds were fired, pinged and cancelled for real, the lake
is then damaged the way a bug would: a closed cohort reopened or grown, an
action applied twice under one key, an action applied with no key, a
cleanup run twice by a process that was not killed.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kinflow.engine import Engine
from kinflow.storage import Lake
from tests.engine.invariants import all_instances
from tests.reliability import cleanup_handler, effect_log
from tests.reliability.family import PING, Shape, definitions, seats
from tests.reliability.invariants import InvariantViolation, Ledger, settle
from tests.reliability.journal import Journal
from tests.reliability.kill_audit import KillAudit

pytestmark = pytest.mark.lake


async def booking(lake: Lake, log: Path) -> tuple[Engine, str, list[str]]:
    """A booking of three holds: one pinged under a key, all cancelled (the cohort closed),
    their cleanups run."""
    engine = Engine(lake)
    cleanup_handler.register(engine, log)
    await engine.ensure_ready()
    await engine.deploy(definitions())
    started = await engine.start_instance("event-booking", fields=seats(0, Shape(1, 3, 0)))
    parent = started.instance
    holds = [r.child_id for r in parent.subworkflows]
    await engine.fire_action(holds[0], "hold", PING, idempotency_key="one")
    await engine.fire_cohort(parent.id_, "holds", "hold", PING, idempotency_key="bulk")
    await engine.cancel_cohort(parent.id_, "holds", idempotency_key="close")
    await settle(engine)
    return engine, parent.id_, holds


async def test_a_closed_cohort_that_grows_or_reopens_is_seen(lake: Lake, tmp_path: Path
                                                             ) -> None:
    engine, parent_id, _ = await booking(lake, tmp_path / "log")
    ledger = Ledger()
    instances = await ledger.check(engine, random.Random(1))
    parent = instances[parent_id]
    assert parent.cohorts and parent.cohorts[0].closedAt is not None
    grown = parent.subworkflows[0].model_copy(update={"rowKey": "late"})
    parent.subworkflows.append(grown)
    with pytest.raises(InvariantViolation, match="closed cohort holds grew"):
        ledger._closed_cohorts(instances)

    await lake.collection().update_one({"_id": parent_id}, {
        "$set": {"cohorts.0.closedAt": None, "_rev": "damaged"}})
    with pytest.raises(InvariantViolation, match="closed cohort holds reopened"):
        await ledger.check(engine, random.Random(1))


async def test_an_action_applied_twice_or_without_its_key_is_seen(lake: Lake, tmp_path: Path
                                                                  ) -> None:
    engine, _, holds = await booking(lake, tmp_path / "log")
    journal = Journal(tmp_path / "journal")
    journal.begin({"op": "fireCohort", "key": "bulk"})
    ledger, audit = Ledger(), KillAudit()
    instances = await ledger.check(engine, random.Random(1))
    audit.check(ledger, instances, journal, tmp_path / "log", set())
    assert audit.bulk_fires == 3

    hold = await lake.collection().find_one({"_id": holds[0]})
    assert hold is not None
    fired = [h for h in hold["history"] if h.get("action") == PING]
    assert len(fired) == 2  # one by its own key, one by the bulk call's derived key
    twice = dict(fired[0], _key="again")
    await lake.collection().update_one({"_id": holds[0]}, {
        "$push": {"history": twice}, "$set": {"_rev": "damaged"}})
    with pytest.raises(InvariantViolation, match="fired 2 actions"):
        await ledger.check(engine, random.Random(1))

    unkeyed = dict(fired[0], _key="unkeyed", at="2030-01-01T00:00:00.000Z")
    await lake.collection().update_one({"_id": holds[1]}, {
        "$push": {"history": unkeyed}, "$set": {"_rev": "damaged-too"}})
    damaged = await all_instances(engine)
    with pytest.raises(InvariantViolation, match=f"{holds[1]}: hold.ping .* fired under 0 keys"):
        audit.check(Ledger(), damaged, journal, tmp_path / "log", set())


async def test_a_cleanup_run_twice_by_a_live_process_is_seen(lake: Lake, tmp_path: Path
                                                             ) -> None:
    log = tmp_path / "log"
    engine, _, _ = await booking(lake, log)
    ran = effect_log.runs(log)
    assert len(ran) == 3 and all(len(pids) == 1 for pids in ran.values())
    ledger = Ledger()
    instances = await ledger.check(engine, random.Random(1))
    effect, (pid,) = next(iter(ran.items()))
    with log.open("a") as again:
        again.write(f"{effect} {pid}\n")
    KillAudit().check(ledger, instances, Journal(tmp_path / "j"), log, {pid})  # pid was killed
    with pytest.raises(InvariantViolation, match="ran 2 times"):
        KillAudit().check(ledger, instances, Journal(tmp_path / "j"), log, set())

    log.write_text("")  # no run at all, though every hold reached released
    with pytest.raises(InvariantViolation, match="cleanup never ran"):
        KillAudit().check(ledger, instances, Journal(tmp_path / "j"), log, set())
