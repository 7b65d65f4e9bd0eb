"""Plan contexts and started instances for pure core tests (no lake, no clock)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

from kinflow.core import verbs
from kinflow.core.context import Actor, PlanContext
from kinflow.core.state import Instance
from kinflow.define.expand import expand_definition
from kinflow.define.models import WorkflowDefinition

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ALICE = Actor.person("alice", "editor")


def ctx(now: datetime = NOW, actor: Actor | None = None, **kw: Any) -> PlanContext:
    """A plan context with a fixed moment and counting keys and tokens."""
    counter, tokens = itertools.count(), itertools.count()
    return PlanContext(now=now, actor=actor or Actor.system(), dataset="production",
                       new_key=lambda: f"k{next(counter)}",
                       new_token=lambda: f"token{next(tokens)}", **kw)  # fmt: skip


def definition(name: str, stages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": name, "title": name.title(), "initialStage": stages[0]["name"],
            "fields": extra.pop("fields", []), "stages": stages, **extra}  # fmt: skip


def deployed(raw: dict[str, Any]) -> dict[str, Any]:
    stored = WorkflowDefinition.model_validate(expand_definition(raw)).to_json()
    return {"_id": f"definition.{stored['name']}.v1", "version": 1, "contentHash": "h", **stored}


def start(raw: dict[str, Any], fields: dict[str, Any] | None = None,
          c: PlanContext | None = None) -> Instance:
    """A started instance: created, primed, first hop run."""
    verb = verbs.StartInstance(deployed(raw), fields, "instance.t")
    return verbs.plan_start(verb, c or ctx()).instance


def history_types(instance: Instance) -> list[str]:
    return [row["_type"] for row in instance.history]
