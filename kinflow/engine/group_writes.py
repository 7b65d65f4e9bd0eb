"""The writes of a group commit's members (engine/group.py): stamps owed, one statement.

* A stamp a member newly owes its parent goes in the group's stamp document for
  that parent (``engine/stamps.py``) instead of on the member's own document, so
  the round that honours it need not write the child again. The instance in
  memory keeps the hint: the driver asks the parent for a round by it.
* The members' updates go to the lake as one statement (``Lake.update_each``)
  instead of one each: a group of k members sends a ``find``, one ``update``, the
  stamp documents and the commit. Each member still goes through
  ``Transactor.write``, which, while the group sets ``transact.BATCHED``, adds its
  update to the batch instead of sending it (filtered on ``_id`` alone and fenced
  by the transaction as there). Traced, each member sends its own, so its write
  stays under its own commit span (docs/observability.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from kinflow.core.mutation import Mutation
from kinflow.core.state import Instance
from kinflow.engine.stamps import Owed
from kinflow.engine.transact import Batch, Transactor
from kinflow.observability import engine as observing
from kinflow.timestamps import iso

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession


async def write_member(t: Transactor, mutation: Mutation, state: Instance,
                       session: AsyncClientSession, now: datetime, owed: Owed) -> None:
    """A member's write (its update batched while ``transact.BATCHED`` is set); a new
    owed stamp noted in ``owed`` (module docstring)."""
    instance = mutation.instance
    parent, token = instance.propagateTo, instance.propagateToken
    fresh = parent is not None and token is not None and token != state.propagateToken
    if fresh:  # written without the hint, which the stamp document carries
        instance.propagateTo, instance.propagateToken = state.propagateTo, state.propagateToken
    try:
        await t.write(mutation, state.rev_, session, now)
    finally:
        instance.propagateTo, instance.propagateToken = parent, token
    if fresh:
        assert parent is not None
        # traced, the member's commit span is current here (grouping.writing)
        owed.setdefault(parent, []).append((instance.id_, observing.traceparent()))


async def write_batch(t: Transactor, batch: Batch, session: AsyncClientSession,
                      now: datetime) -> None:
    """Send the members' updates as one statement; each instance gets its new ``_rev``."""
    if not batch:
        return
    revs = await t.lake.update_each(
        [(mutation.instance.id_, update, filters or None) for mutation, update, filters
         in batch], dataset=t.dataset, session=session, now=now)
    for (mutation, _, _), rev in zip(batch, revs, strict=True):
        mutation.instance.rev_ = rev
        mutation.instance.updatedAt_ = iso(now)
