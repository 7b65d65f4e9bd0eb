"""History rows: the append-only audit of an instance.

One function appends one row; every row gets a fresh ``_key``, its
``_type``, the commit's single clock reading as ``at`` and an
``executionContext`` stamp. Variant payloads are plain keyword data so the
callers read like the spec's table. Rows are never edited or removed.
"""

from __future__ import annotations

from typing import Any

from kinflow.core.context import PlanContext
from kinflow.core.state import Instance

EXECUTION_CONTEXT = {"runtime": "python", "engine": "kinflow"}


def record(instance: Instance, ctx: PlanContext, type_: str, **data: Any) -> dict[str, Any]:
    """Append a ``type_`` history row with ``data`` (``None`` values left out)."""
    row: dict[str, Any] = {"_key": ctx.new_key(), "_type": type_, "at": ctx.now_iso}
    row.update({k: v for k, v in data.items() if v is not None})
    row["executionContext"] = EXECUTION_CONTEXT
    instance.history.append(row)
    return row


def actor_stamp(ctx: PlanContext) -> dict[str, Any]:
    return ctx.actor.to_json()
