"""The heartbeat's port into an engine: finishing what a crash or a pass left owed.

Callers (the API, the CLI, a program) use ``Engine``'s verbs and reads; the
worker's heartbeat also needs to find due instances, finish interrupted
spawns and bulk calls, repair terminal instances and run propagation rounds.
Those live here, on ``Engine.maintenance``, so the client surface stays what
a caller may do and the worker's needs are one object it is handed.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from kinflow.core import verbs
from kinflow.core.context import Actor
from kinflow.core.state import Instance

if TYPE_CHECKING:
    from kinflow.engine.bulk import BulkRunner
    from kinflow.engine.driving import Driver
    from kinflow.engine.materialise import Materialiser
    from kinflow.engine.reads import Reader
    from kinflow.engine.registration import Registrar
    from kinflow.engine.transact import Transactor


class Maintenance:
    """What the heartbeat asks of one engine (one dataset)."""

    def __init__(self, transact: Transactor, driver: Driver, materialiser: Materialiser,
                 bulk: BulkRunner, reads: Reader, registrar: Registrar) -> None:
        self.transact = transact
        self.registrar = registrar
        self.driver = driver
        self.materialiser = materialiser
        self.bulk = bulk
        self.reads = reads

    @property
    def materialising_now(self) -> Collection[str]:
        """Parents whose children this process is creating (the heartbeat skips them)."""
        return self.materialiser.now

    @property
    def bulk_now(self) -> set[str]:
        """Parents with a bulk cohort call running in this process (the heartbeat skips
        them)."""
        return self.bulk.now

    async def due_instances(self, *, limit: int = 100, exclude: list[str] | None = None
                            ) -> list[str]:
        """Ids of in-flight instances whose ``nextEvaluationAt`` has passed."""
        return await self.reads.due_instances(limit=limit, exclude=exclude)

    async def finish_materialising(self, parent_id: str, *, actor: Actor | None = None) -> int:
        """Create the children a large spawn registered but a crash left uncreated."""
        return await self.materialiser.finish(await self.transact.load(parent_id, None),
                                              actor or Actor.system())

    @property
    def registering_now(self) -> set[str]:
        """Parents whose rows this process is registering (the heartbeat skips them)."""
        return self.registrar.now

    async def finish_registration(self, parent_id: str, *, actor: Actor | None = None) -> int:
        """Register the rest of a cohort's rows from its checkpoint (engine/registration.py);
        returns how many batches it committed."""
        return await self.registrar.run(parent_id, actor or Actor.system())

    async def finish_bulk(self, parent_id: str, *, actor: Actor | None = None) -> int:
        """Finish the bulk cohort calls a crash interrupted between batches (engine/bulk.py)."""
        return await self.bulk.finish(parent_id, actor or Actor.system())

    async def repair(self, instance_id: str, *, actor: Actor | None = None) -> Instance:
        """Finish what a crash left owed on one instance: drain owed aborts, make owed
        cancel requests, propagate.

        The heartbeat calls this for terminal instances (an aborted parent whose
        drain was interrupted); in-flight ones are repaired by ``Engine.tick``.
        """
        actor = actor or Actor.system()
        instance = await self.transact.load(instance_id, None)
        instance = await self.driver.drain_condemned(instance, actor)
        instance = await self.driver.drain_cancels(instance, actor)
        await self.driver.after(instance)
        return instance

    async def propagate_to(self, parent_id: str) -> None:
        """Run a propagation round on ``parent_id`` (stamp owed rows, cascade, go up)."""
        await self.driver.propagator.request(parent_id)

    async def settle_propagation(self) -> None:
        """Wait until no propagation round is running in this process (background mode)."""
        await self.driver.propagator.idle()

    async def sweep_stale_claims(self, instance_id: str, *, actor: Actor | None = None) -> int:
        """Release every expired effect claim of one instance; returns how many."""
        mutation = await self.transact.commit(instance_id, verbs.plan_sweep,
                                              verb="sweepStaleClaims",
                                              actor=actor or Actor.system(), attempts=5)
        released: int = mutation.result
        return released
