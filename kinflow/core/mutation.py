"""A Mutation: everything one commit writes, as planned by the pure core.

The shell (``kinflow.engine.transact``) executes a Mutation in one
transaction: insert the instance, or update it with the diff against
``before`` fenced on the loaded ``_rev`` (a fenced whole replace only when
there is no ``before``); insert and update the registry row documents
(``rows``, core/cohort/chunks.py) beside it; create the first ``spawn_txn`` child documents (the
rest right after); clear the honoured propagation stamps. Planners never
touch the lake; they return one of these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kinflow.core.cohort.chunks import RowWrites
from kinflow.core.state import Instance, PendingEffect


@dataclass(slots=True)
class Mutation:
    instance: Instance
    insert: bool = False  # a new document rather than a fenced update
    changed: bool = False  # the instance's state changed (what callers see)
    dirty: bool = False  # something must be written (state or derived hints)
    moves: int = 0
    creates: list[dict[str, Any]] = field(default_factory=list)
    effects_queued: list[PendingEffect] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    rows: RowWrites = field(default_factory=RowWrites)  # row documents beside the instance
    replay: bool = False
    result: Any = None
    settle: list[str] = field(default_factory=list)  # children whose cascade the shell owes
    clears: list[tuple[str, str]] = field(default_factory=list)  # (child id, token) honoured
    before: dict[str, Any] | None = None  # the loaded document (for a targeted write)
    before_bytes: int | None = None  # its size, estimated from its JSON text
    size_limit: int | None = None  # the largest document this write may leave (sizes.py)
    size_reserve: int = 0  # room to keep free below the engine's ceiling (sizes.py)
