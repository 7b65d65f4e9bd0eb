"""Definitions for the graceful-cancellation tests: a three-level family whose members
clean up in a ``cancelStage`` by running an effect (``release-<name>``)."""

from __future__ import annotations

from typing import Any

from tests.engine.definitions import simple

_DONE = "count($activities[name == '{}' && status == 'done']) > 0"
SETTLED = "count($subworkflows[current && status == 'active']) == 0"


def cleanup_stage(effect: str) -> dict[str, Any]:
    """``cleanup``: runs ``effect`` once, then ends in ``released``."""
    return {"name": "cleanup", "activities": [{"name": "release", "actions": [
        {"name": "release", "when": "true", "effects": [
            {"name": effect, "bindings": {"who": "$fields.item"}}]},
        {"name": "released", "when": f"$effectStatus['{effect}'] == 'done'",
         "status": "done"}]}],
        "transitions": [{"name": "to-released", "to": "released"}]}


def leaf(name: str = "cx-leaf", *, cleanup: bool = True,
         timeout: int | None = None) -> dict[str, Any]:
    """Works until ``finish``; cancelled, it releases its slot in ``cleanup``."""
    stages: list[dict[str, Any]] = [
        {"name": "work", "activities": [{"name": "task", "actions": [
            {"name": "finish", "status": "done"}, {"name": "give-up", "status": "failed"}]}],
         "transitions": [{"name": "to-failed", "to": "failed", "when": "$anyActivityFailed"},
                         {"name": "to-done", "to": "done"}]},
        {"name": "done"}, {"name": "failed", "outcome": "failed"}]
    extra: dict[str, Any] = {}
    if cleanup:
        stages += [cleanup_stage(f"release-{name}"), {"name": "released"}]
        extra["cancelStage"] = "cleanup"
    if timeout is not None:
        extra["cancelTimeoutSeconds"] = timeout
    return simple(name, stages, lifecycle="child", fields=[
        {"name": "item", "type": "string", "initialValue": {"type": "input"}}], **extra)


def spawner(name: str, child: str, rows: list[str], *, cleanup: bool = True,
            on_cancel: str | None = None, on_exit: str | None = None,
            lifecycle: str | None = None, budget: dict[str, Any] | None = None,
            policy: str | None = None) -> dict[str, Any]:
    """Spawns one ``child`` per row in ``work`` and waits for them; ``leave`` moves it
    on to ``after`` whatever the children do."""
    spawn: dict[str, Any] = {"forEach": str(rows).replace("'", '"'),
                             "definition": {"name": child}, "with": {"item": "$row"}}
    if on_cancel:
        spawn["onCancel"] = on_cancel
    if on_exit:
        spawn["onExit"] = on_exit
    if budget is not None:
        spawn["failureBudget"] = budget
    if policy is not None:
        spawn["onBudgetExceeded"] = policy
    stages: list[dict[str, Any]] = [
        {"name": "work", "activities": [{"name": "kids", "actions": [
            {"name": "fan-out", "when": "true", "spawn": spawn},
            {"name": "all-done", "when": SETTLED, "status": "done"}]},
            {"name": "manage", "actions": [{"name": "leave", "status": "done"}]}],
         "transitions": [
             {"name": "to-after", "to": "after", "when": _DONE.format("manage")},
             {"name": "to-done", "to": "done", "when": _DONE.format("kids")}]},
        {"name": "after", "activities": [{"name": "wrap", "actions": [
            {"name": "finish", "status": "done"}]}],
         "transitions": [{"name": "to-done", "to": "done"}]},
        {"name": "done"}]
    extra: dict[str, Any] = {}
    if cleanup:
        stages += [cleanup_stage(f"release-{name}"), {"name": "released"}]
        extra["cancelStage"] = "cleanup"
    if lifecycle:
        extra["lifecycle"] = lifecycle
    return simple(name, stages, fields=[
        {"name": "item", "type": "string", "initialValue": {"type": "input"}}], **extra)


def family() -> list[dict[str, Any]]:
    """``cx-root`` -> two ``cx-mid`` -> two ``cx-leaf`` each; every member cleans up."""
    return [leaf(), spawner("cx-mid", "cx-leaf", ["x", "y"], lifecycle="child"),
            spawner("cx-root", "cx-mid", ["m1", "m2"])]


def exits() -> dict[str, Any]:
    """``cx-exits``: three cohorts of one ``cx-leaf`` each, spawned with ``onExit``
    ``abort``, ``cancel`` and ``detach``; ``leave`` moves it on to ``after``."""
    activities: list[dict[str, Any]] = [
        {"name": policy, "actions": [{
            "name": "fan-out", "when": "true", "status": "done", "spawn": {
                "forEach": f'["{policy}"]', "definition": {"name": "cx-leaf"},
                "with": {"item": "$row"}, "onExit": policy}}]}
        for policy in ("abort", "cancel", "detach")]
    activities.append({"name": "manage", "actions": [{"name": "leave", "status": "done"}]})
    return simple("cx-exits", [
        {"name": "work", "activities": activities,
         "transitions": [{"name": "to-after", "to": "after", "when": _DONE.format("manage")}]},
        {"name": "after", "activities": [{"name": "wrap", "actions": [
            {"name": "finish", "status": "done"}]}],
         "transitions": [{"name": "to-done", "to": "done"}]},
        {"name": "done"}])
