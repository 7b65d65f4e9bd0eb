"""Group commit: concurrent verbs on different instances share one lake transaction.

Why: on the embedded lake a transaction's fixed costs (its ``find``, its
``commitTransaction``, the session) are a third of the daemon's CPU for a
child fire's commit; k fires in one transaction pay them once
(docs/performance.md, "Group commit").

How: a verb that goes through ``Grouper.commit`` joins the queue. While
fewer than ``flights`` groups are in flight, a group starts at once with every
verb queued by then (at most ``size``); verbs that arrive meanwhile form the
next group. A lone verb never waits for company: a group of one is the
ordinary commit (``Transactor.commit``), unchanged.

A group of two or more is one transaction: one ``find`` of every member's
instance by ``$in``, then each member planned on its own state at one clock
reading, then the members' writes (their updates in one statement, the stamps
they owe their parents in one document per parent: engine/group_writes.py). Each
member keeps its own semantics:

* **fencing**: every member's instance is read in the transaction's snapshot,
  so a commit on it since makes the member's write a write conflict;
* **idempotency**: each member is planned on its own state, keys included;
* **its own error**: a member whose plan is refused (a ``KinflowError``)
  or whose instance is missing gets that error and writes nothing, the others
  commit. A member that needs more than the simple shape (a heavy instance,
  registry rows, children to create, stamps to clear, a second member on the
  same instance) runs alone after the group. The process remembers cohort
  parents (the last ``SOLO`` it committed or found in a group): their verbs
  skip the queue and commit at once, so a verb on a parent never waits
  behind a group of children. When the group's transaction fails for any
  reason (a write conflict on one member, a refused write, the lake gone),
  nobody gets that failure: every member runs again alone, as an ordinary
  commit with its own retries. So a conflict in one member never
  fails another, and a refused one leaves the others applied.

Traced, each member keeps a ``commit <verb>`` span in its caller's trace, linked to
the group's ``commit groupCommit`` span (``observability/grouping.py``).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kinflow.core.context import Actor
from kinflow.core.errors import InstanceNotFound
from kinflow.core.mutation import Mutation
from kinflow.core.state import INSTANCE_TYPE, Instance, parse_instance
from kinflow.engine.group_writes import write_batch, write_member
from kinflow.engine.stamps import Owed, Stamps
from kinflow.engine.transact import BATCHED, Batch, Planner, Transactor, heavy
from kinflow.errors import KinflowError, RevisionConflict
from kinflow.observability import engine as observing
from kinflow.observability import grouping
from kinflow.observability.switch import ON

if TYPE_CHECKING:
    from pymongo.asynchronous.client_session import AsyncClientSession

SIZE = 16  # members of one group at most
FLIGHTS = 2  # group transactions of one process in flight at once
SOLO = 1024  # instances remembered as needing a commit of their own (cohort parents)


@dataclass(eq=False)
class Member:
    """One verb waiting for its group."""

    instance_id: str
    planner: Planner
    verb: str
    actor: Actor
    done: asyncio.Future[Mutation]
    mutation: Mutation | None = None
    error: BaseException | None = None
    alone: bool = False  # needs an ordinary commit of its own
    traced: grouping.Caller | None = None  # the caller's trace (tracing on)

    def reset(self) -> None:
        self.mutation, self.error, self.alone = None, None, False


@dataclass
class Grouper:
    """Queues verbs and commits them in groups (module docstring)."""

    transact: Transactor
    size: int = SIZE
    flights: int = FLIGHTS
    queue: list[Member] = field(default_factory=list)
    flying: int = 0
    groups: int = 0  # group transactions committed (for benchmarks)
    grouped: int = 0  # members committed in them
    solo: OrderedDict[str, None] = field(default_factory=OrderedDict)  # known parents
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def commit(self, instance_id: str, planner: Planner, *, verb: str, actor: Actor
                     ) -> Mutation:
        if instance_id in self.solo:
            # a cohort parent: a group would only read it and run it alone after the
            # group's transaction, so it commits at once beside the flights
            self.solo.move_to_end(instance_id)
            return await self.transact.commit(instance_id, planner, verb=verb, actor=actor)
        if self.flying < self.flights and not self.queue:
            # nobody to share with: the ordinary commit, no waiting
            self.flying += 1
            try:
                return await self.transact.commit(instance_id, planner, verb=verb,
                                                  actor=actor)
            finally:
                self.flying -= 1
                self._launch()
        member = Member(instance_id, planner, verb, actor,
                        asyncio.get_running_loop().create_future(),
                        traced=grouping.caller(verb, instance_id))
        self.queue.append(member)
        self._launch()
        return await member.done

    def remember_solo(self, instance_id: str) -> None:
        """``instance_id`` is a cohort parent: its verbs commit at once, never grouped."""
        self.solo[instance_id] = None
        self.solo.move_to_end(instance_id)
        while len(self.solo) > SOLO:
            self.solo.popitem(last=False)

    def _launch(self) -> None:
        """Start a group from the queue while a flight is free."""
        while self.queue and self.flying < self.flights:
            members, self.queue = self.queue[:self.size], self.queue[self.size:]
            self.flying += 1
            # a fresh context: the group is nobody's nested transaction
            task = asyncio.get_running_loop().create_task(
                self._fly(members), context=contextvars.Context())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _fly(self, members: list[Member]) -> None:
        try:
            waiting = [m for m in members if not m.done.done()]  # a caller may be gone
            if len(waiting) == 1:
                await self._alone(waiting[0])
            elif waiting:
                await self._group(waiting)
        except BaseException:  # cancelled (shutdown): nobody waits for ever
            for member in members:
                if not member.done.done():
                    member.done.cancel()
            raise
        finally:
            self.flying -= 1
            self._launch()

    async def _alone(self, member: Member) -> None:
        try:
            with grouping.resumed(member.traced):  # in the caller's trace
                mutation = await self.transact.commit(member.instance_id, member.planner,
                                                      verb=member.verb, actor=member.actor)
        except BaseException as exc:  # the caller gets it, as from its own commit
            _settle(member, error=exc)
            if not isinstance(exc, Exception):
                raise
            return
        _settle(member, mutation=mutation)

    async def _group(self, members: list[Member]) -> None:
        seen: set[str] = set()
        for member in members:  # one member per instance in a transaction
            member.reset()
            member.alone = member.instance_id in seen
            seen.add(member.instance_id)
        grouped = [m for m in members if not m.alone]
        t = self.transact
        try:
            with observing.commit("groupCommit") as watch:
                await t.lake.transaction(lambda session: self._callback(grouped, session),
                                         verb="groupCommit", attempts=1, on_retry=watch.retry)
        except Exception as exc:  # nobody gets the group's failure: each runs alone
            grouping.ended((m.traced for m in grouped), exc)
            for member in grouped:
                member.reset()
                member.alone = True
        else:
            grouping.ended(m.traced for m in grouped)
            self.groups += 1
            for member in grouped:
                if member.mutation is not None and not member.alone:
                    self.grouped += 1
                    try:
                        await t.after_commit(member.mutation)
                    except Exception as exc:  # its own, as after its commit
                        _settle(member, error=exc)
                        continue
                    _settle(member, mutation=member.mutation)
                elif member.error is not None:
                    _settle(member, error=member.error)
        for member in members:
            if member.alone and not member.done.done():
                await self._alone(member)

    async def _callback(self, members: list[Member], session: AsyncClientSession) -> None:
        t = self.transact
        now = t.clock()
        for member in members:
            member.reset()
        found = await t.lake.get_many([m.instance_id for m in members], dataset=t.dataset,
                                      session=session)
        planned: list[tuple[Member, Instance]] = []
        for member in members:
            document = found.get(member.instance_id)
            if document is None or document.get("_type") != INSTANCE_TYPE:
                member.error = InstanceNotFound(f"no instance {member.instance_id!r}",
                                                instanceId=member.instance_id)
                continue
            grouping.loaded(member.traced, document)
            state = parse_instance(document)
            if state.rowCount or heavy(state) or member.instance_id in t.kept:
                member.alone = True  # a cohort parent: its own commit reads its rows
                self.remember_solo(member.instance_id)
                continue
            try:
                mutation = await t.plan(_bind(member.planner, state), member.actor, session,
                                        now)
            except RevisionConflict:
                member.alone = True
                continue
            except KinflowError as exc:  # refused, as its own commit would be: writes nothing
                member.error = exc
                continue
            if mutation.rows or mutation.creates or mutation.clears or mutation.insert:
                member.alone = True  # its own transaction writes those
                continue
            member.mutation = mutation
            planned.append((member, state))
        owed: Owed = {}  # parent -> members owing it a stamp (engine/stamps.py)
        batch: Batch = []  # their updates, one statement (engine/group_writes.py)
        batching = BATCHED.set(None if ON.tracing else batch)
        try:
            for member, state in planned:
                assert member.mutation is not None
                with grouping.writing(member.traced, len(planned)):  # its span, its trace
                    if member.mutation.dirty:
                        await write_member(t, member.mutation, state, session, now, owed)
        finally:
            BATCHED.reset(batching)
        await write_batch(t, batch, session, now)
        await Stamps(t.lake, t.dataset).owe(owed, session, now)


def _bind(planner: Planner, state: Instance) -> Callable[..., Mutation]:
    return lambda ctx: planner(state, ctx)


def _settle(member: Member, *, mutation: Mutation | None = None,
            error: BaseException | None = None) -> None:
    if member.done.done():
        return
    if error is not None:
        member.done.set_exception(error)
    else:
        assert mutation is not None
        member.done.set_result(mutation)
