"""The idempotency ledger (engine-model §3.10, §4.10).

This module owns ``processedRequests``: a keyed verb records its key in the
same fenced commit as its effect, so a retried call finds the key and
replays (no second application) instead of applying again. Rows live for a
TTL and are pruned whenever a later keyed commit happens. A live key reused
for a different verb is a caller bug (``contract-violation``), as is an
empty key.
"""

from __future__ import annotations

from datetime import timedelta

from kinflow.engine.context import PlanContext, iso, parse_iso
from kinflow.engine.errors import ContractViolation
from kinflow.engine.state import Instance, ProcessedRequest


def is_replay(instance: Instance, ctx: PlanContext, key: str | None, op: str) -> bool:
    """Whether ``key`` was already applied to this instance (by ``op``)."""
    if key is None:
        return False
    if not isinstance(key, str) or not key.strip():
        raise ContractViolation("an idempotency key must be a non-empty string", op=op)
    for row in instance.processedRequests:
        if row.key == key and parse_iso(row.expiresAt) > ctx.now:
            if row.op != op:
                raise ContractViolation(
                    f"idempotency key {key!r} was already used for {row.op}, not {op}",
                    idempotencyKey=key, usedFor=row.op, op=op,
                )
            return True
    return False


def remember(instance: Instance, ctx: PlanContext, key: str | None, op: str) -> None:
    """Record ``key`` for ``op`` and prune expired rows (only on keyed commits)."""
    if key is None:
        return
    instance.processedRequests = [
        row for row in instance.processedRequests if parse_iso(row.expiresAt) > ctx.now
    ]
    ttl = timedelta(seconds=ctx.limits.idempotency_ttl_seconds)
    instance.processedRequests.append(ProcessedRequest.model_validate({
        "_key": ctx.new_key(), "key": key, "op": op, "processedAt": ctx.now_iso,
        "expiresAt": iso(ctx.now + ttl),
    }))
