"""The checker: what must hold of the whole lake once the heartbeat has nothing left to do.

``Ledger.check`` reads every instance and asserts the subworkflow invariants
(docs/reliability.md lists them); it keeps what it saw last time, so a later
check also proves that no committed child disappeared and that every
history only grew by appending. Each assertion evaluated counts as one
check, so the figures in the docs are real counts, not estimates.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kinflow.core.state import Instance, parse_instance
from kinflow.engine import Engine
from kinflow.worker import Worker

FAILED_MOVES = {"translate-article": "abandoned", "release-review": "rejected",
                "release": "cancelled"}


class InvariantViolation(AssertionError):
    """One invariant did not hold; the message names the instance."""


@dataclass
class Ledger:
    """What earlier checks saw: histories, and which child belongs to which parent."""

    histories: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    children: dict[str, str] = field(default_factory=dict)
    closed: dict[tuple[str, str, str], int] = field(default_factory=dict)  # rows when closed
    checks: int = 0
    rounds: int = 0

    def expect(self, ok: bool, message: str) -> None:
        self.checks += 1
        if not ok:
            raise InvariantViolation(message)

    async def check(self, engine: Engine, rng: random.Random, sample: int = 8
                    ) -> dict[str, Instance]:
        """Every invariant over every instance; returns the instances it read."""
        docs = await engine.lake.find({"_type": "kinflow.instance"})
        instances = {str(d["_id"]): parse_instance(await engine.assemble(d)) for d in docs}
        self._registries(instances)
        self._children(instances)
        self._hints_and_gates(instances)
        self._cancellations(instances)
        self._closed_cohorts(instances)
        self._keyed_fires(instances)
        self._history(instances)
        await self._ticks(engine, instances, rng, sample)
        self.rounds += 1
        return instances

    def _registries(self, instances: dict[str, Instance]) -> None:
        """One child per row identity; condemned rows resolved; terminal children stamped."""
        owners: Counter[str] = Counter()
        for parent in instances.values():
            identities = Counter((r.stageEntry, r.activity, r.action, r.rowKey)
                                 for r in parent.subworkflows)
            for identity, n in identities.items():
                self.expect(n == 1, f"{parent.id_}: {n} children for row {identity}")
            for row in parent.subworkflows:
                owners[row.child_id] += 1
                child = instances.get(row.child_id)
                self.expect(child is not None,
                            f"{parent.id_}: row {row.rowKey} names missing {row.child_id}")
                assert child is not None
                self.expect(child.parentInstance == parent.id_,
                            f"{child.id_} registered by {parent.id_}, parent says "
                            f"{child.parentInstance}")
                self.expect(row.abortPending is None or row.resolved is not None,
                            f"{parent.id_}: condemned row {row.rowKey} unresolved")
                if row.abortPending is not None:
                    self.expect(child.terminal, f"condemned child {child.id_} still live")
                self.expect(not child.terminal or row.resolved is not None,
                            f"{parent.id_}: terminal child {child.id_} not stamped")
                self.expect(child.terminal or row.resolved is None,
                            f"{parent.id_}: live child {child.id_} stamped resolved")
        for child_id, n in owners.items():
            self.expect(n == 1, f"{child_id} registered {n} times")

    def _children(self, instances: dict[str, Instance]) -> None:
        """Every child is in its parent's registry; no child seen before has gone."""
        for child in instances.values():
            if child.parentInstance is None:
                continue
            parent = instances.get(child.parentInstance)
            self.expect(parent is not None, f"{child.id_}: parent {child.parentInstance} gone")
            assert parent is not None
            self.expect(any(r.child_id == child.id_ or child.id_ in (r.previousChildIds or ())
                            for r in parent.subworkflows),  # or a redriven row's earlier attempt
                        f"{child.id_}: not in the registry of {parent.id_}")
        for child_id, parent_id in self.children.items():
            found = instances.get(child_id)
            self.expect(found is not None and found.parentInstance == parent_id,
                        f"committed child {child_id} of {parent_id} lost")
        self.children.update({i.id_: i.parentInstance for i in instances.values()
                              if i.parentInstance is not None})

    def _hints_and_gates(self, instances: dict[str, Instance]) -> None:
        """No repair hint left; no live instance sits where its own gates would move it."""
        for instance in instances.values():
            self.expect(instance.propagateTo is None, f"{instance.id_} owes its parent a stamp")
            self.expect(not instance.owesAborts, f"{instance.id_} owes aborts")
            self.expect(not instance.materialising, f"{instance.id_} still materialising")
            self.expect(not instance.owesBulk, f"{instance.id_} owes a bulk call's batches")
            self.expect(instance.owing is None,  # derived from the flags on every write
                        f"{instance.id_} is indexed as owing {instance.owing}")
            entry = instance.open_entry()
            if instance.terminal or entry is None:
                continue
            statuses = [a.status for a in entry.activities]
            self.expect("failed" not in statuses or instance.definition not in FAILED_MOVES,
                        f"{instance.id_}: an activity failed in {entry.name}, did not move")
            self.expect(not statuses or any(s == "active" for s in statuses),
                        f"{instance.id_}: every activity of {entry.name} settled, did not move")
            current = [r for r in instance.subworkflows if r.stageEntry == entry.key_]
            if current and all(instances[r.child_id].terminal for r in current):
                spawning = {r.activity for r in current}
                if instance.definition == "release-review":
                    for activity in spawning:
                        found = entry.activity(activity)
                        self.expect(found is not None and found.status != "active",
                                    f"{instance.id_}: cohort settled, gate did not fire")

    def _cancellations(self, instances: dict[str, Instance]) -> None:
        """No child live under a CANCELLED parent (but those ``onCancel: detach`` let go);
        no cancelled row without a cancelled or aborted child; no cancel request owed."""
        for parent in instances.values():
            self.expect(not parent.owesCancels, f"{parent.id_} owes cancel requests")
            for row in parent.subworkflows:
                child = instances.get(row.child_id)
                if parent.cancelledAt is not None and not row.detached:
                    self.expect(child is None or child.terminal,
                                f"{parent.id_} is CANCELLED, its child {row.child_id} is live")
                if row.resolved is not None and row.resolved.cancelled and child is not None:
                    self.expect(child.cancelledAt is not None or child.abortedAt is not None,
                                f"{parent.id_}: row {row.rowKey} cancelled, child "
                                f"{child.id_} is {child.terminal_state}")

    def _closed_cohorts(self, instances: dict[str, Instance]) -> None:
        """A cohort a cancel or abort closed stays closed and never gains a row."""
        for parent in instances.values():
            for cohort in parent.cohorts or []:
                if cohort.closedAt is None:
                    continue
                rows = sum(1 for r in parent.subworkflows if r.activity == cohort.activity
                           and r.stageEntry == cohort.stageEntry)
                known = self.closed.setdefault((parent.id_, cohort.activity, cohort.stageEntry),
                                               rows)
                self.expect(rows <= known, f"{parent.id_}: closed cohort {cohort.activity} grew "
                                           f"from {known} to {rows} rows")
        for parent_id, activity, entry in self.closed:
            found = instances.get(parent_id)
            self.expect(found is not None and any(
                c.activity == activity and c.stageEntry == entry and c.closedAt is not None
                for c in found.cohorts or []), f"{parent_id}: closed cohort {activity} reopened")

    def _keyed_fires(self, instances: dict[str, Instance]) -> None:
        """An action fired under an idempotency key (a caller's, or a bulk call's derived
        ``<key>:<rowKey>``) was applied once: one caller-fired ``actionFired`` in the
        commit that recorded the key."""
        for instance in instances.values():
            fired = Counter(h["at"] for h in instance.history
                            if h.get("_type") == "actionFired" and not h.get("triggered"))
            for request in instance.processedRequests:
                if request.op == "fireAction":
                    self.expect(fired[request.processedAt] <= 1,
                                f"{instance.id_}: key {request.key} fired "
                                f"{fired[request.processedAt]} actions")

    def _history(self, instances: dict[str, Instance]) -> None:
        """Each history starts with everything it held last time."""
        for iid, before in self.histories.items():
            found = instances.get(iid)
            self.expect(found is not None, f"{iid} disappeared")
            assert found is not None
            self.expect(found.history[: len(before)] == before,
                        f"{iid}: history rewritten (had {len(before)} rows)")
        self.histories = {iid: list(i.history) for iid, i in instances.items()}

    async def _ticks(self, engine: Engine, instances: dict[str, Instance],
                     rng: random.Random, sample: int) -> None:
        """A sample of live instances: a tick must find nothing left to move."""
        live = sorted(iid for iid, i in instances.items() if not i.terminal)
        for iid in rng.sample(live, min(sample, len(live))):
            again = await engine.tick(iid)
            self.expect(not again.changed, f"{iid}: a tick still moved it")


async def settle(engine: Engine, max_passes: int = 60) -> int:
    """Heartbeat passes until one finds nothing to do; returns how many items were handled."""
    worker = Worker(engine, grace_seconds=0, worker_id="reliability-checker")
    handled = 0
    for _ in range(max_passes):
        report = await worker.run_pass()
        if report.failed:
            raise InvariantViolation(f"heartbeat items failed: {report.failed}")
        if not report.processed:  # skipped items were finished by someone else
            return handled
        handled += len(report.processed)
    raise InvariantViolation(f"work still owed after {max_passes} heartbeat passes")
