"""The idempotency ledger (docs/engine.md#commits).

This module owns ``processedRequests``: a keyed verb records its key in the
same fenced commit as its effect, so a retried call finds the key and
replays (no second application) instead of applying again. Rows live for a
TTL and are pruned whenever a later keyed commit happens.

A row remembers the verb and a fingerprint of its arguments (a hash of their
canonical JSON), so only the *same* call replays: a live key reused for
another verb, or for the same verb with other arguments, is a caller bug
(``contract-violation``, ``details.reason: "idempotency-key-reused"``) that
would otherwise be swallowed as a silent replay. Rows written before
fingerprints existed replay on the verb alone. An empty key is refused too.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from kinflow.core.context import PlanContext
from kinflow.core.errors import IdempotencyKeyInvalid, IdempotencyKeyReused
from kinflow.core.state import Instance, ProcessedRequest
from kinflow.timestamps import iso, parse_iso


def fingerprint(op: str, args: dict[str, Any]) -> str:
    """A stable hash of the verb and its user-visible arguments (``None`` == absent)."""
    present = {name: value for name, value in args.items() if value is not None}
    # ASCII-escaped, so any string a JSON parser accepts (a lone surrogate too) hashes
    text = json.dumps({"op": op, "args": present}, sort_keys=True, separators=(",", ":"),
                      default=str)
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def is_replay(instance: Instance, ctx: PlanContext, key: str | None, op: str,
              args: dict[str, Any] | None = None) -> bool:
    """Whether this exact call (``key``, ``op``, ``args``) was already applied."""
    if key is None:
        return False
    if not isinstance(key, str) or not key.strip():
        raise IdempotencyKeyInvalid("an idempotency key must be a non-empty string", op=op,
                                    reason="idempotency-key-empty")
    for row in instance.processedRequests:
        if row.key != key or parse_iso(row.expiresAt) <= ctx.now:
            continue
        if row.op != op:
            raise IdempotencyKeyReused(
                f"idempotency key {key!r} was already used for {row.op}, not {op}",
                idempotencyKey=key, usedFor=row.op, op=op,
                reason="idempotency-key-reused",
            )
        if row.fingerprint is not None and row.fingerprint != fingerprint(op, args or {}):
            raise IdempotencyKeyReused(
                f"idempotency key {key!r} was already used for {op} with other arguments",
                idempotencyKey=key, usedFor=row.op, op=op,
                reason="idempotency-key-reused",
            )
        return True
    return False


def remember(instance: Instance, ctx: PlanContext, key: str | None, op: str,
             args: dict[str, Any] | None = None) -> None:
    """Record ``key`` for this call and prune expired rows (only on keyed commits)."""
    if key is None:
        return
    instance.processedRequests = [
        row for row in instance.processedRequests if parse_iso(row.expiresAt) > ctx.now
    ]
    ttl = timedelta(seconds=ctx.limits.idempotency_ttl_seconds)
    instance.processedRequests.append(ProcessedRequest.model_validate({
        "_key": ctx.new_key(), "key": key, "op": op, "processedAt": ctx.now_iso,
        "expiresAt": iso(ctx.now + ttl), "fingerprint": fingerprint(op, args or {}),
    }))
