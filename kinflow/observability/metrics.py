"""Every metric kinflow exports (docs/observability.md lists them with their labels).

One registry of kinflow's own, so ``/metrics`` serves exactly these (and the
scrape-time collectors of ``gauges``), whatever else the process registers.
Label values are bounded by construction: operation and verb names come from
the schema and the engine, outcome codes from kinflow's error codes, lake
commands from the driver, effect names from the registered handlers. No
label ever carries an instance, document or token id.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

_CHILDREN: dict[tuple[int, tuple[str, ...]], Any] = {}


def child(metric: Any, *values: str) -> Any:
    """``metric.labels(*values)``, kept: the label sets are few, and the client's own
    lookup (checks, a lock) costs more than the count itself on every round trip."""
    key = (id(metric), values)
    found = _CHILDREN.get(key)
    if found is None:
        found = _CHILDREN[key] = metric.labels(*values)
    return found

FAST = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SLOW = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

OPERATIONS = Counter(
    "kinflow_graphql_operations", "GraphQL operations served, by root field, type and outcome "
    "code (ok, or the first error's code).", ["operation", "type", "code"], registry=REGISTRY)
OPERATION_SECONDS = Histogram(
    "kinflow_graphql_operation_seconds", "Time to execute a GraphQL operation.",
    ["operation", "type"], buckets=SLOW, registry=REGISTRY)

VERBS = Counter(
    "kinflow_engine_verbs", "Engine verbs run, by verb and outcome code.", ["verb", "code"],
    registry=REGISTRY)
VERB_SECONDS = Histogram(
    "kinflow_engine_verb_seconds", "Time an engine verb takes to rest (its cascade included).",
    ["verb"], buckets=SLOW, registry=REGISTRY)
COMMITS = Counter(
    "kinflow_commits", "Commits (one transaction each), by verb and outcome: ok, "
    "concurrent-modification, lake-unavailable, refused (a planner's refusal), error.",
    ["verb", "outcome"], registry=REGISTRY)
COMMIT_SECONDS = Histogram(
    "kinflow_commit_seconds", "Time a commit takes, its retried attempts included.", ["verb"],
    buckets=FAST, registry=REGISTRY)
COMMIT_RETRIES = Counter(
    "kinflow_commit_retries", "Commit attempts run again, by verb and cause: conflict (a write "
    "conflict or fence miss) or lake (the lake was unreachable).", ["verb", "cause"],
    registry=REGISTRY)

LAKE_COMMANDS = Counter(
    "kinflow_lake_commands", "Lake round trips, by command and outcome (ok or failed).",
    ["command", "outcome"], registry=REGISTRY)
LAKE_SECONDS = Histogram(
    "kinflow_lake_command_seconds", "Lake round-trip time, by command.", ["command"],
    buckets=FAST, registry=REGISTRY)

HEARTBEAT_PASSES = Counter(
    "kinflow_heartbeat_passes", "Heartbeat passes, by outcome: ok, or failed.", ["outcome"],
    registry=REGISTRY)
HEARTBEAT_SECONDS = Histogram(
    "kinflow_heartbeat_pass_seconds", "Time a heartbeat pass takes.", buckets=SLOW,
    registry=REGISTRY)
HEARTBEAT_ITEMS = Counter(
    "kinflow_heartbeat_items", "Items the heartbeat handled, by kind (tick, effects, propagate, "
    "materialise, bulk, drain, cancel) and outcome (done, failed, parked).", ["kind", "outcome"],
    registry=REGISTRY)

EFFECTS_CLAIMED = Counter(
    "kinflow_effects_claimed", "Effects claimed and handed to their handler, by effect name.",
    ["effect"], registry=REGISTRY)
EFFECTS_FINISHED = Counter(
    "kinflow_effects_finished", "Effect handler runs finished, by effect name and outcome "
    "(done or failed).", ["effect", "outcome"], registry=REGISTRY)
EFFECT_SECONDS = Histogram(
    "kinflow_effect_handler_seconds", "Time an effect handler runs.", ["effect"],
    buckets=SLOW, registry=REGISTRY)

HUB_DELIVERED = Counter(
    "kinflow_hub_events_delivered", "Change events offered to subscribers (one per "
    "subscriber a change reached).", registry=REGISTRY)
HUB_RESYNCS = Counter(
    "kinflow_hub_resyncs", "Subscribers told to resync: one fell behind its queue, or the "
    "change stream lost its history (every subscriber).", registry=REGISTRY)
HUB_LAG = Histogram(
    "kinflow_hub_lag_seconds", "Time from a change's commit (the lake's wall time) to its "
    "dispatch to subscribers.", buckets=FAST, registry=REGISTRY)
