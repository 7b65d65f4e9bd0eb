"""Three generations for the retention tests: a root spawns ``mid``, which spawns ``leaf``.

Both spawns are ``onExit: detach``, so a root can finish while its child and
grandchild still run. Each member finishes when its ``finish`` action fires.
"""

from __future__ import annotations

from typing import Any

from tests.engine.definitions import simple


def generation(name: str, spawns: str | None, *, lifecycle: str | None = "child",
               retention: int | None = None, rows: str = "['a']") -> dict[str, Any]:
    actions: list[dict[str, Any]] = [{"name": "finish", "status": "done"}]
    if spawns:
        actions.insert(0, {"name": "fan-out", "when": "true", "spawn": {
            "forEach": rows, "definition": {"name": spawns}, "onExit": "detach"}})
    extra: dict[str, Any] = {}
    if lifecycle:
        extra["lifecycle"] = lifecycle
    if retention is not None:
        extra["retention"] = {"days": retention}
    return simple(name, [
        {"name": "work", "activities": [{"name": "task", "actions": actions}],
         "transitions": [{"name": "to-done", "to": "done"}]},
        {"name": "done"},
    ], **extra)


def family(root: str = "root", *, retention: int | None = None, rows: str = "['a']"
           ) -> list[dict[str, Any]]:
    return [generation(root, f"{root}-mid", lifecycle=None, retention=retention, rows=rows),
            generation(f"{root}-mid", f"{root}-leaf", rows=rows),
            generation(f"{root}-leaf", None)]
