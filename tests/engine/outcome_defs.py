"""Definitions for the outcome and output tests (engine and API)."""

from __future__ import annotations

from typing import Any

from tests.engine.cohort_defs import parent
from tests.engine.definitions import simple


def worker(name: str = "c", *, auto: bool = False,
           outputs: list[str] | None = None) -> dict[str, Any]:
    """A child: ``finish(words)`` ends in ``done``; ``give-up`` ends in ``gave-up``, a stage
    marked ``outcome: failed``. ``auto``: it ends in ``done`` at once."""
    work: dict[str, Any] = {"name": "work", "activities": [{"name": "task", "actions": [
        {"name": "finish", "params": [{"name": "words", "type": "number"}],
         "ops": [{"type": "field.set", "target": "wordCount",
                  "value": {"type": "param", "param": "words"}}], "status": "done"},
        {"name": "give-up", "status": "failed"}]}],
        "transitions": [{"name": "to-gave-up", "to": "gave-up", "when": "$anyActivityFailed"},
                        {"name": "to-done", "to": "done"}]}
    if auto:
        work = {"name": "work", "transitions": [
            {"name": "to-done", "to": "done", "when": "true"},
            {"name": "to-gave-up", "to": "gave-up", "when": "false"}]}
    return simple(name, [work, {"name": "done"}, {"name": "gave-up", "outcome": "failed"}],
                  lifecycle="child", outputs=["wordCount", "item"] if outputs is None
                  else outputs, fields=[
                      {"name": "item", "type": "string", "initialValue": {"type": "input"}},
                      {"name": "wordCount", "type": "number",
                       "initialValue": {"type": "literal", "value": 7}}])


def tallying(gates: dict[str, str], **kwargs: Any) -> dict[str, Any]:
    """``parent()`` whose review stage has a ``tally`` activity: one cascade-fired action
    per gate (name -> condition), each setting nothing but firing once."""
    p = parent(**kwargs)
    review = p["stages"][1]
    review["activities"].append({"name": "tally", "actions": [
        *({"name": name, "when": when} for name, when in gates.items()),
        {"name": "close", "status": "done"}]})
    return p
