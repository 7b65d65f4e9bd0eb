"""Background work: heartbeat passes, effect handler runs, the change hub's deliveries.

* ``heartbeat_pass``: times one pass and counts its items by kind and outcome;
* ``handler``: wraps an effect handler so each run is counted, timed and spanned;
* ``change_seen``: the hub dispatched a change: deliveries, lag from the lake's commit;
* ``resynced``: subscribers told to resync.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from opentelemetry.trace import SpanKind

from kinflow.observability import context, metrics, tracing
from kinflow.observability.switch import ON

T = TypeVar("T")


class PassLike(Protocol):
    processed: list[tuple[str, str]]
    failed: list[tuple[str, str, str]]
    parked: list[tuple[str, str, str]]


async def heartbeat_pass(run: Callable[[], Awaitable[T]]) -> T:
    """Run one heartbeat pass, timed and its items counted."""
    if not ON.metrics:
        return await run()
    started = time.perf_counter()
    outcome = "failed"
    try:
        report = await run()  # untraced: an idle pass makes no trace; its verbs start theirs
        outcome = "ok"
        _count_items(report)
        return report
    finally:
        metrics.child(metrics.HEARTBEAT_PASSES, outcome).inc()
        metrics.HEARTBEAT_SECONDS.observe(time.perf_counter() - started)


def _count_items(report: Any) -> None:
    for kind, _ in getattr(report, "processed", ()):
        metrics.child(metrics.HEARTBEAT_ITEMS, kind, "done").inc()
    for kind, *_ in getattr(report, "failed", ()):
        metrics.child(metrics.HEARTBEAT_ITEMS, kind, "failed").inc()
    for kind, *_ in getattr(report, "parked", ()):
        metrics.child(metrics.HEARTBEAT_ITEMS, kind, "parked").inc()


Handler = Callable[[Any], Any]


def handler(name: str, run: Handler | None) -> Handler | None:
    """``run`` (the handler of effects named ``name``), counted, timed and spanned."""
    if run is None or not (ON.metrics or ON.tracing):
        return run

    async def watched(call: Any) -> Any:
        if ON.metrics:
            metrics.child(metrics.EFFECTS_CLAIMED, name).inc()
        started = time.perf_counter()
        outcome = "failed"
        tokens = context.enter_instance(str(getattr(call, "instance_id", "")))
        try:
            if ON.tracing:
                with tracing.tracer().start_as_current_span(
                        f"effect {name}", kind=SpanKind.INTERNAL,
                        attributes={"kinflow.effect": name,
                                    "kinflow.instance_id": str(getattr(call, "instance_id", ""))}):
                    result = await _finish(run(call))
            else:
                result = await _finish(run(call))
            outcome = "done"
            return result
        finally:
            context.leave_instance(tokens)
            if ON.metrics:
                metrics.child(metrics.EFFECTS_FINISHED, name, outcome).inc()
                metrics.child(metrics.EFFECT_SECONDS, name).observe(time.perf_counter() - started)

    return watched


async def _finish(outputs: Any) -> Any:
    return await outputs if inspect.isawaitable(outputs) else outputs


def change_seen(change: Mapping[str, Any], delivered: int) -> None:
    """A change the hub dispatched to ``delivered`` subscribers: how long after its commit."""
    if not ON.metrics:
        return
    if delivered:
        metrics.HUB_DELIVERED.inc(delivered)
    wall = change.get("wallTime")
    if isinstance(wall, datetime):
        if wall.tzinfo is None:
            wall = wall.replace(tzinfo=UTC)
        metrics.HUB_LAG.observe(max(0.0, (datetime.now(UTC) - wall).total_seconds()))
        return
    cluster = change.get("clusterTime")
    moment = getattr(cluster, "time", None)  # a BSON timestamp: whole seconds
    if isinstance(moment, int):
        metrics.HUB_LAG.observe(max(0.0, time.time() - moment))


def resynced() -> None:
    """A subscriber was told to resync (it fell behind, or the stream lost its history)."""
    if ON.metrics:
        metrics.HUB_RESYNCS.inc()
