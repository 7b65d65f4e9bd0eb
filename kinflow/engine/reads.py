"""The shell's read paths (definitions, instances, due ids, verdicts, GROQ) and deploy."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kinflow.core import deploy as deploying
from kinflow.core.context import Actor
from kinflow.core.errors import DefinitionNotFound, InstanceNotFound
from kinflow.core.gates import Verdict
from kinflow.core.gates import available_actions as action_verdicts
from kinflow.core.state import INSTANCE_TYPE, Instance, parse_instance
from kinflow.define.validate import Checked
from kinflow.engine.transact import Transactor
from kinflow.errors import DocumentExists
from kinflow.gdr import to_gdr
from kinflow.timestamps import iso

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession


@dataclass(slots=True)
class DeployedDefinition:
    name: str
    version: int
    status: str


@dataclass(slots=True)
class DeployOutcome:
    definitions: list[DeployedDefinition]
    warnings: list[str] = field(default_factory=list)


class Reader:
    """Reads over the engine's dataset (outside any commit), and the deploy transaction."""

    def __init__(self, transact: Transactor) -> None:
        self.transact = transact

    async def deploy(self, definitions: list[Any]) -> DeployOutcome:
        """Validate and store a batch; all or nothing."""
        t = self.transact
        # validation is CPU-bound (a large definition takes seconds): off the event loop
        checked = await asyncio.to_thread(deploying.validate_batch, definitions,
                                          max_bytes=t.limits.definition_bytes)

        async def callback(session: AsyncClientSession) -> deploying.DeployPlan:
            now = t.clock()
            deployed = await self._deployed_heads(checked, session)
            plan = deploying.plan_deploy(checked, deployed, iso(now))
            for document in plan.creates:
                await t.lake.create(document, dataset=t.dataset, session=session, now=now)
            return plan

        try:
            plan = await t.lake.transaction(callback, verb="deployDefinitions")
        except DocumentExists:  # a concurrent deploy created that version first
            plan = await t.lake.transaction(callback, verb="deployDefinitions")
        return DeployOutcome(
            [DeployedDefinition(r.name, r.version, r.status) for r in plan.results],
            plan.warnings,
        )

    async def _deployed_heads(
        self, checked: list[Checked], session: AsyncClientSession
    ) -> dict[tuple[str, int | None], dict[str, Any]]:
        t = self.transact
        heads: dict[tuple[str, int | None], dict[str, Any]] = {}
        for name in deploying.referenced_names(checked):
            latest = await t.latest_definition(name, session)
            if latest is not None:
                heads[(name, None)] = latest
        for name, version in deploying.pinned_refs(checked):
            found = await t.lake.get(deploying.definition_id(name, version),
                                     dataset=t.dataset, session=session)
            if found is not None:
                heads[(name, version)] = found
        return heads

    async def definition(self, name: str, version: int | None = None) -> dict[str, Any]:
        t = self.transact
        if version is None:
            found = await t.latest_definition(name)
        else:
            found = await t.lake.get(deploying.definition_id(name, version), dataset=t.dataset)
        if found is None:
            raise DefinitionNotFound(
                f"no deployed definition {name!r}" + (f" v{version}" if version else ""),
                definition=name, version=version,
            )
        return found

    async def instance(self, instance_id: str) -> Instance:
        """The instance as readers see it: its registry rows and whole history included."""
        document = await self.transact.lake.get(instance_id, dataset=self.transact.dataset)
        if document is None or document.get("_type") != INSTANCE_TYPE:
            raise InstanceNotFound(f"no instance {instance_id!r}", instanceId=instance_id)
        return parse_instance(await self.transact.rows.assemble(document))

    async def verdicts(self, instance: Instance, actor: Actor) -> list[Verdict]:
        """One verdict per action of the current stage, reading the lake as the gates ask."""
        t = self.transact
        definition = instance.definition_model()
        verdicts: list[Verdict] = await t.plan(
            lambda ctx: action_verdicts(instance, definition, ctx, actor), actor, None,
            t.clock())
        return verdicts

    async def query(self, query: str, params: dict[str, Any] | None = None,
                    caller: str | None = None) -> Any:
        """Read-only GROQ over this dataset; parameters are bound, never spliced.

        ``caller`` (an API caller's identity) runs it in that caller's lane of the
        evaluation threads with its parameters bounded; ``None`` is the engine's own
        query (the same path a plan's lake queries take)."""
        t = self.transact
        if caller is None:
            return await t.query(query, params or {}, t.clock())
        return await t.lake.groq(query, params=params or {}, now=t.clock(),
                                 budget=t.limits.groq_budget(caller=True), dataset=t.dataset,
                                 caller=caller)

    async def instances_for_document(self, gdr: str) -> list[Instance]:
        """In-flight instances whose reference fields point at ``gdr`` (a GDR or bare id)."""
        t = self.transact
        uri = str(to_gdr(gdr, t.dataset))
        # one indexed predicate besides _type: the embedded planner serves only
        # queries its index covers whole (else it reads every instance)
        found = await t.lake.find({"_type": INSTANCE_TYPE, "watch": uri}, dataset=t.dataset)
        return [parse_instance(doc) for doc in found if not doc.get("completedAt")]

    async def due_instances(self, *, limit: int = 100, exclude: list[str] | None = None
                            ) -> list[str]:
        """Ids of in-flight instances whose ``nextEvaluationAt`` has passed (for a heartbeat).

        ``exclude`` pages past ids the caller could not take (their lease is held).
        """
        t = self.transact
        now = iso(t.clock())
        # served by instance_due_at alone (a bounded range skips the instances without
        # a due time); completed and excluded ones are dropped here, since any other
        # predicate would make the embedded planner read every instance
        skip = set(exclude or ())
        found = await t.lake.find(
            {"_type": INSTANCE_TYPE, "nextEvaluationAt": {"$gt": "", "$lte": now}},
            dataset=t.dataset, sort=[("nextEvaluationAt", 1)], limit=limit + len(skip),
            projection={"_id": 1, "completedAt": 1},
        )
        due = [str(doc["_id"]) for doc in found
               if not doc.get("completedAt") and str(doc["_id"]) not in skip]
        return due[:limit]
