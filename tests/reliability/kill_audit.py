"""What the kill test asserts beyond the checker, from what only its driver knows.

The driver keys every action it fires, alone or through ``fireCohort``, so:

* every caller-fired ``actionFired`` on any instance belongs to exactly one key
  recorded in the same commit (an action applied without its key, or applied
  twice, would leave one over; the checker already asserts no key fired two);
* each ``fireCohort`` call the journal holds reached each child at most once
  under its derived key ``<key>:<rowKey>``.

And about the holds' ``release-seat`` cleanup, which the driver and the test's
heartbeat both run (tests/reliability/cleanup_handler.py logs every run with
its process): effects are delivered at least once, and kinflow promises no
second run while the first runner lives (docs/reliability.md). So every run of
one effect but the last was in a process that was then SIGKILLed; each hold
has at most one cleanup effect; and every hold that finished its cancel stage
(CANCELLED in ``released``) had its cleanup run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from kinflow.core.state import Instance
from tests.reliability.effect_log import runs
from tests.reliability.invariants import Ledger
from tests.reliability.journal import Journal


@dataclass
class KillAudit:
    """Figures of the last audit (each assertion is one of the ledger's checks)."""

    bulk_fires: int = 0  # children a journaled fireCohort reached under its derived key
    cleanups: int = 0  # cleanup effects that ran
    cleanups_rerun: int = 0  # of those, run again after a killed process had run them

    def check(self, ledger: Ledger, instances: dict[str, Instance], journal: Journal,
              effect_log: Path, killed: set[int]) -> None:
        self._fires(ledger, instances, journal)
        self._cleanups(ledger, instances, effect_log, killed)

    def _fires(self, ledger: Ledger, instances: dict[str, Instance], journal: Journal) -> None:
        for instance in instances.values():
            keyed = Counter(r.processedAt for r in instance.processedRequests
                            if r.op == "fireAction")
            for entry in instance.history:
                if entry.get("_type") == "actionFired" and not entry.get("triggered"):
                    ledger.expect(keyed[entry["at"]] == 1,
                                  f"{instance.id_}: {entry.get('activity')}."
                                  f"{entry.get('action')} at {entry['at']} fired under "
                                  f"{keyed[entry['at']]} keys")
        calls = [e["key"] for e in journal.begun() if e["op"] == "fireCohort"]
        self.bulk_fires = 0
        for instance in instances.values():
            derived = Counter(r.key.rsplit(":", 1)[0] for r in instance.processedRequests
                              if r.op == "fireAction" and ":" in r.key)
            for key in calls:
                ledger.expect(derived[key] <= 1,
                              f"{instance.id_}: bulk call {key} fired it {derived[key]} times")
                self.bulk_fires += derived[key]

    def _cleanups(self, ledger: Ledger, instances: dict[str, Instance], effect_log: Path,
                  killed: set[int]) -> None:
        ran = runs(effect_log)
        self.cleanups, self.cleanups_rerun = len(ran), 0
        per_instance: Counter[str] = Counter()
        for effect, pids in ran.items():
            per_instance[effect.split(":", 1)[0]] += 1
            ledger.expect(all(pid in killed for pid in pids[:-1]),
                          f"cleanup {effect} ran {len(pids)} times, pids {pids}, killed "
                          f"{sorted(set(pids) & killed)}")
            self.cleanups_rerun += len(pids) > 1
        for iid, n in per_instance.items():
            ledger.expect(n == 1, f"{iid}: {n} cleanup effects")
        for hold in instances.values():
            if hold.definition == "seat-hold" and hold.cancelledAt is not None \
                    and hold.currentStage == "released":
                ledger.expect(per_instance[hold.id_] == 1,
                              f"{hold.id_} CANCELLED in released, its cleanup never ran")
