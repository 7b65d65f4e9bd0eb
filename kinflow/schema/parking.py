"""``parkedInstances``: the instances the heartbeat parked, with why and until when.

An instance whose heartbeat work keeps failing with a permanent refusal
(``cascade-limit``, say) is parked (``kinflow.engine.parking``): the
heartbeat leaves it alone until its back-off ends or someone ticks it. The
inspector lists them, and ``kinflow inspect`` marks them, from this query.
"""

from __future__ import annotations

import strawberry

from kinflow.engine.parking import Parked
from kinflow.errors import InvalidInput
from kinflow.gdr import check_document_id
from kinflow.schema.context import KInfo
from kinflow.schema.scalars import JSON, DateTime

MAX_PARKED = 1000


@strawberry.type(description="An instance the heartbeat parked after a permanent refusal.")
class ParkedInstance:
    instance_id: strawberry.ID
    kind: str = strawberry.field(description="The heartbeat's work that failed (tick, ...).")
    code: str = strawberry.field(description="The refusal's code, e.g. cascade-limit.")
    message: str
    details: JSON
    parked_at: DateTime
    until: DateTime = strawberry.field(description="When the heartbeat tries it again.")
    failures: int = strawberry.field(description="Failures in a row; each doubles the wait.")

    @classmethod
    def of(cls, parked: Parked) -> ParkedInstance:
        return cls(instance_id=strawberry.ID(parked.instance), kind=parked.kind,
                   code=parked.code, message=parked.message, details=JSON(parked.details),
                   parked_at=DateTime(parked.parked_at), until=DateTime(parked.until),
                   failures=parked.failures)


@strawberry.type
class ParkingQuery:
    @strawberry.field(description=(
        "Instances the heartbeat parked (most recent first); tick one to un-park it."))
    async def parked_instances(self, info: KInfo, ids: list[strawberry.ID] | None = None,
                               first: int | None = 100) -> list[ParkedInstance]:
        first = 100 if first is None else first
        if not 0 < first <= MAX_PARKED:
            raise InvalidInput(f"first must be between 1 and {MAX_PARKED}", argument="first",
                               limit=MAX_PARKED)
        if ids is not None and len(ids) > MAX_PARKED:
            raise InvalidInput(f"at most {MAX_PARKED} ids", argument="ids", limit=MAX_PARKED)
        engine = info.context.engine
        wanted = None if ids is None else [check_document_id(str(i)) for i in ids]
        found = await engine.parked(wanted, limit=first)
        return [ParkedInstance.of(p) for p in found]
