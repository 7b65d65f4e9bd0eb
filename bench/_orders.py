"""The order workflow ``bench/live.py`` drives: its two definitions and the ``ship`` handler.

An ``order`` spawns one ``order-line`` child per line as it starts; a line is
finished by one action (``pick.pack``); the order's gate (``all-packed``, an
automatic action waiting until no line of the current visit is active) moves
it to ``ready``, where ``ship.ship`` runs the ``ship`` effect and moves it to
``shipped``.

The served process loads this file as its effect handlers
(``KINFLOW_EFFECT_HANDLERS``), which calls ``register``; so it imports only
the standard library.
"""

from __future__ import annotations

import json
from typing import Any

GATE = "count($subworkflows[activity == 'lines' && current && status == 'active']) == 0"


def line_names(children: int) -> list[str]:
    """The order's lines: one child each."""
    return [f"line-{n + 1}" for n in range(children)]


def definitions(children: int) -> list[dict[str, Any]]:
    """``order-line`` and an ``order`` whose first stage spawns ``children`` lines."""
    line: dict[str, Any] = {
        "name": "order-line", "title": "Order line", "lifecycle": "child",
        "initialStage": "picking",
        "fields": [{"name": "sku", "type": "string", "initialValue": {"type": "input"}}],
        "stages": [
            {"name": "picking", "activities": [{"name": "pick", "actions": [
                {"name": "pack", "status": "done"}]}],
             "transitions": [{"name": "to-packed", "to": "packed"}]},
            {"name": "packed"},
        ],
    }  # fmt: skip
    order: dict[str, Any] = {
        "name": "order", "title": "Order", "initialStage": "open", "fields": [],
        "stages": [
            {"name": "open", "activities": [{"name": "lines", "actions": [
                {"name": "fan-out", "when": "true", "spawn": {
                    "forEach": json.dumps(line_names(children)),
                    "definition": {"name": "order-line"}, "with": {"sku": "$row"},
                    "onExit": "abort"}},
                {"name": "all-packed", "when": GATE, "status": "done"}]}],
             "transitions": [{"name": "to-ready", "to": "ready"}]},
            {"name": "ready", "activities": [{"name": "ship", "actions": [
                {"name": "ship", "status": "done", "effects": [{"name": "ship", "outputs": [
                    {"name": "carrier", "type": "string"}]}]}]}],
             "transitions": [{"name": "to-shipped", "to": "shipped"}]},
            {"name": "shipped"},
        ],
    }  # fmt: skip
    return [line, order]


def register(engine: Any) -> None:
    """The ``ship`` effect: nothing to call in a benchmark, so it only answers."""

    def ship(call: Any) -> dict[str, Any]:
        return {"carrier": "bench"}

    engine.register_handler("ship", ship)
