"""The effect drain: claim a pending effect with a lease, run its handler, report.

Handlers run outside any transaction; the claim (a commit of its own) is what
keeps two drains from running one effect twice while its lease lasts.

A handler is engine code, so what it returns is never refused: outputs that
do not fit (too large, or not what the definition declares) fail the effect,
saying why. Refusing them would leave the effect claimed, due again when its
lease ends and refused again, for ever.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from kinflow.core.context import Actor, Limits
from kinflow.core.effects import next_claimable
from kinflow.core.errors import EffectNotFound, EffectOutputsInvalid, MissingEffectHandler
from kinflow.core.inputs import bounded_outcome
from kinflow.core.state import Instance
from kinflow.errors import KinflowError
from kinflow.observability import work


@dataclass(frozen=True, slots=True)
class EffectCall:
    """What an effect handler receives."""

    instance_id: str
    effect_key: str
    name: str
    params: dict[str, Any]
    claim_token: str


EffectHandler = Callable[[EffectCall], Awaitable[Mapping[str, Any] | None] | Mapping[str, Any]
                         | None]


@dataclass(slots=True)
class DrainReport:
    drained: int = 0
    failed: int = 0
    skipped: int = 0
    lost: int = 0


class EffectVerbs(Protocol):
    """The engine verbs a drain needs (``Engine`` has them)."""

    handlers: dict[str, EffectHandler]

    async def get_instance(self, instance_id: str) -> Instance: ...

    async def claim_effect(self, instance_id: str, effect_key: str, *,
                           actor: Actor | None = None) -> str: ...

    async def complete_effect(self, instance_id: str, effect_key: str, status: str, *,
                              outputs: dict[str, Any] | None = None, error: str | None = None,
                              duration_ms: int | None = None,
                              actor: Actor | None = None) -> Any: ...


async def drain_effects(engine: EffectVerbs, instance_id: str, *, actor: Actor,
                        now: Callable[[], datetime], limits: Limits,
                        missing_handler: str = "skip") -> DrainReport:
    """Claim, run and report every runnable pending effect of one instance."""
    report = DrainReport()
    attempted: set[str] = set()
    while True:
        instance = await engine.get_instance(instance_id)
        pending = next_claimable(instance, now(), attempted)
        if pending is None:
            return report
        attempted.add(pending.key_)
        handler = work.handler(pending.name, engine.handlers.get(pending.name))  # watched
        if handler is None:
            if missing_handler == "fail":
                raise MissingEffectHandler(f"no handler for effect {pending.name!r}",
                                           effect=pending.name, phase="drain")
            report.skipped += 1
            continue
        try:
            claimed = await engine.claim_effect(instance_id, pending.key_, actor=actor)
        except KinflowError:  # lost the claim race or the effect settled meanwhile
            continue
        started = time.monotonic()
        try:
            outputs = handler(EffectCall(instance_id, pending.key_, pending.name,
                                         dict(pending.params), claimed))
            if inspect.isawaitable(outputs):
                outputs = await outputs
            status, error = "done", None
        except Exception as exc:  # the handler's failure is the effect's outcome
            outputs, status, error = None, "failed", f"{type(exc).__name__}: {exc}"
        outputs, status, error = bounded_outcome(outputs, status, error, limits)
        duration = int((time.monotonic() - started) * 1000)
        try:
            try:
                await engine.complete_effect(
                    instance_id, pending.key_, status,
                    outputs=dict(outputs) if outputs else None, error=error,
                    duration_ms=duration, actor=actor,
                )
            except EffectOutputsInvalid as refused:
                status = "failed"
                _, _, error = bounded_outcome(None, status, undeclared(refused), limits)
                await engine.complete_effect(instance_id, pending.key_, status, error=error,
                                             duration_ms=duration, actor=actor)
        except EffectNotFound:
            report.lost += 1
            continue
        if status == "done":
            report.drained += 1
        else:
            report.failed += 1


def undeclared(refused: EffectOutputsInvalid) -> str:
    """The failed effect's error for outputs the definition refused, with each reason."""
    issues = refused.details.get("issues") or []
    reasons = "; ".join(f"{issue.get('output')}: {issue.get('reason')}" for issue in issues)
    return f"{refused.message}" + (f" ({reasons})" if reasons else "")
