"""Group commits traced per member (``engine/group.py``): each member's trace stays whole.

A group of concurrent verbs shares one lake transaction, traced as ``commit
groupCommit``: a trace of its own (it serves many callers), with the shared
round trips under it (the one ``find`` of every member's instance, the
``commitTransaction``). Each member still gets a ``commit <verb>`` span in its
caller's trace, under the caller's ``verb`` span: from the moment it queued to
the group's end, linked to the group's span (and the group's span to it), with
its own writes (``lake update``) under it. So one grouped ``fireAction`` reads
operation -> verb -> commit -> its lake writes in its own trace, and the link
leads to the transaction it shared.

A member that runs alone after all (it needs a transaction of its own, it was
the only one waiting, or the group failed) runs its ordinary commit in its
caller's trace too (``resumed``). A failed group ends each member's span with
an error status; the member's own commit follows it.

With tracing off ``caller`` is ``None`` and every hook returns at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from contextvars import Token
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, StatusCode

from kinflow.observability import context, engine, tracing
from kinflow.observability.switch import ON

_NOTHING: AbstractContextManager[Any] = nullcontext()


class Caller:
    """The trace a queued member came from: its context, its verb span, when it queued."""

    __slots__ = ("context", "instance_id", "queued", "span", "verb", "verb_span")

    def __init__(self, verb: str, instance_id: str) -> None:
        self.verb = verb
        self.instance_id = instance_id
        self.context = otel_context.get_current()
        self.verb_span = engine.VERB.get()
        self.queued = time.time_ns()
        self.span: trace.Span | None = None  # its commit span, while its group runs


def caller(verb: str, instance_id: str) -> Caller | None:
    """The caller's trace, for a member joining the queue (``None``: tracing is off)."""
    return Caller(verb, instance_id) if ON.tracing else None


def loaded(caller: Caller | None, document: dict[str, Any]) -> None:
    """A member's instance read by its group: the member's verb links to its spawn."""
    if caller is not None:
        engine.link_spawn(caller.verb_span, document)


def writing(caller: Caller | None, size: int) -> AbstractContextManager[Any]:
    """Around a member's write in its group's transaction: its ``commit <verb>`` span
    (made at its first write, linked both ways with the group's span, current now)."""
    if caller is None:
        return _NOTHING
    if caller.span is None:
        group = trace.get_current_span()  # the group's commit span
        caller.span = tracing.tracer().start_span(
            f"commit {caller.verb}", context=caller.context, start_time=caller.queued,
            links=[Link(group.get_span_context(), {"kinflow.link": "group"})],
            attributes={"kinflow.verb": caller.verb, "kinflow.grouped": True,
                        "kinflow.group_size": size})
        group.add_link(caller.span.get_span_context(),
                       {"kinflow.link": "member", "kinflow.instance_id": caller.instance_id})
    return trace.use_span(caller.span, end_on_exit=False)


def ended(callers: Iterable[Caller | None], failure: BaseException | None = None) -> None:
    """The group's transaction is over: each member's commit span ends (``failure``: the
    group failed, and each member runs again alone)."""
    for found in callers:
        if found is None or found.span is None:
            continue
        span, found.span = found.span, None
        span.set_attribute("kinflow.attempts", 1)
        if failure is not None:
            span.set_status(StatusCode.ERROR, "the group failed; the member runs alone")
            span.add_event("group failed", {"kinflow.error": type(failure).__name__})
        span.end()


class _Resumed:
    """The member's own commit in its caller's trace, with its instance on the logs."""

    __slots__ = ("caller", "tokens")

    def __init__(self, caller: Caller) -> None:
        self.caller = caller
        self.tokens: tuple[Any, ...] = ()

    def __enter__(self) -> _Resumed:
        found = self.caller
        held: Token[Any] = engine.VERB.set(found.verb_span)
        self.tokens = (otel_context.attach(found.context), held,
                       context.enter_instance(found.instance_id))
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        attached, held, instance = self.tokens
        context.leave_instance(instance)
        engine.VERB.reset(held)
        otel_context.detach(attached)


def resumed(caller: Caller | None) -> AbstractContextManager[Any]:
    """Around a member's ordinary commit run by the group's task (``caller`` None: nothing)."""
    return _NOTHING if caller is None else _Resumed(caller)
