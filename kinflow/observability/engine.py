"""Engine hooks: a verb, a round, a commit, an instance loaded, the family's trace links.

* ``verb``: the ``verb <name>`` span and the verb metrics around an engine verb
  run to rest; sets the instance id the logs carry.
* ``propagation_round``: the ``round propagate`` span around a propagation round
  on a parent, a trace of its own (a round serves every child that asked).
* ``commit``: the ``commit <verb>`` span (each retried attempt an event on it)
  and the commit metrics around one ``Lake.transaction``.
* ``loaded``: the verb's own instance was read: its root and definition go on
  the logs, and, when the spawn that created it was traced, the verb's span
  links to that spawn.
* ``stamp_children``: the children a commit creates record its trace context
  (``spawnTrace``, a W3C ``traceparent``), so their own spans can link back.
* ``owed`` and ``observed``: a commit that leaves a child owing its parent a
  stamp records its trace context beside the stamp (``propagateTrace``); the
  parent's commit that honours the stamp links to it (at most
  ``OBSERVED_LINKS`` children per commit span).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from pymongo.errors import ConnectionFailure

from kinflow.errors import ConcurrentModification, KinflowError, LakeUnavailable
from kinflow.observability import context, metrics, tracing
from kinflow.observability.switch import ON

T = TypeVar("T")
SPAWN_TRACE = "spawnTrace"  # the field a created child keeps its spawn's traceparent in
# the field a child keeps, beside its owed stamp (propagateToken), the traceparent of the
# commit that owed it; the commit that honours the stamp unsets both
PROPAGATE_TRACE = "propagateTrace"
# children one commit span links to, at most (the first read): a round may honour the
# stamps of hundreds; its span counts them all (kinflow.children_observed)
OBSERVED_LINKS = 64
_W3C = TraceContextTextMapPropagator()


class VerbSpan:
    __slots__ = ("linked", "span")

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        self.linked = False


# the span of the verb this task runs (grouping.py carries it to a member's group)
VERB: ContextVar[VerbSpan | None] = ContextVar("kinflow_verb_span", default=None)
_COMMIT: ContextVar[CommitWatch | None] = ContextVar("kinflow_commit_watch", default=None)


def outcome_code(exc: BaseException | None) -> str:
    if exc is None:
        return "ok"
    if isinstance(exc, KinflowError):
        return exc.code
    return "error"


async def verb(name: str, instance_id: str, work: Awaitable[T]) -> T:
    """Await ``work``, the engine verb ``name`` on ``instance_id``, watched."""
    tokens = context.enter_instance(instance_id)
    started = time.perf_counter()
    failure: BaseException | None = None
    try:
        if ON.tracing:
            return await _spanned(f"verb {name}", name, instance_id, work)
        return await work
    except BaseException as exc:
        failure = exc
        raise
    finally:
        context.leave_instance(tokens)
        if ON.metrics:
            metrics.child(metrics.VERBS, name, outcome_code(failure)).inc()
            metrics.child(metrics.VERB_SECONDS, name).observe(time.perf_counter() - started)


async def propagation_round(parent_id: str, work: Awaitable[T]) -> T:
    """Await ``work``, a propagation round on ``parent_id``: the parent's id on the logs,
    and, tracing, a ``round propagate`` span starting a trace of its own (not under the
    child whose request started the round: it serves every child that asked, and its
    commits link to each child whose stamp they honour, ``observed``)."""
    tokens = context.enter_instance(parent_id)
    try:
        if ON.tracing:
            return await _spanned("round propagate", "propagate", parent_id, work,
                                  otel_context.Context())
        return await work
    finally:
        context.leave_instance(tokens)


async def _spanned(span_name: str, verb_name: str, instance_id: str, work: Awaitable[T],
                   parent: otel_context.Context | None = None) -> T:
    """Await ``work`` under a verb's span (``parent``: an empty context starts a trace)."""
    with tracing.tracer().start_as_current_span(
            span_name, context=parent, attributes={"kinflow.verb": verb_name,
                                                   "kinflow.instance_id": instance_id}) as span:
        held = VERB.set(VerbSpan(span))
        try:
            return await work
        finally:
            VERB.reset(held)


class CommitWatch:
    """One commit, watched: ``with commit(verb) as seen``, then ``on_retry=seen.retry``."""

    __slots__ = ("_held", "_span_cm", "attempts", "linked", "span", "started", "verb")

    def __init__(self, verb: str) -> None:
        self.verb = verb
        self.attempts = 1
        self.span: trace.Span | None = None
        self._span_cm: Any = None
        self._held: Any = None
        self.linked: set[tuple[int, int]] | None = None  # child spans it links to (observed)
        self.started = 0.0

    @property
    def retry(self) -> Callable[[int, BaseException], None] | None:
        return self._retried if (ON.metrics or ON.tracing) else None

    def _retried(self, attempt: int, exc: BaseException) -> None:
        self.attempts += 1
        lost = isinstance(exc, ConnectionFailure)
        if ON.metrics:
            metrics.child(metrics.COMMIT_RETRIES, self.verb, "lake" if lost else "conflict").inc()
        if self.span is not None:
            self.span.add_event("retry", {"attempt": attempt + 1, "cause": type(exc).__name__})

    def __enter__(self) -> CommitWatch:
        self.started = time.perf_counter()
        if ON.tracing:
            self._span_cm = tracing.tracer().start_as_current_span(
                f"commit {self.verb}", attributes={"kinflow.verb": self.verb})
            self.span = self._span_cm.__enter__()
            self._held = _COMMIT.set(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if ON.metrics:
            outcome = "ok"
            if isinstance(exc, ConcurrentModification | LakeUnavailable):
                outcome = exc.code
            elif isinstance(exc, KinflowError):
                outcome = "refused"
            elif exc is not None:
                outcome = "error"
            metrics.child(metrics.COMMITS, self.verb, outcome).inc()
            metrics.child(metrics.COMMIT_SECONDS, self.verb).observe(
                time.perf_counter() - self.started)
        if self._span_cm is not None:
            assert self.span is not None
            _COMMIT.reset(self._held)
            self.span.set_attribute("kinflow.attempts", self.attempts)
            self._span_cm.__exit__(kind, exc, tb)


class _Unwatched:
    """The commit hook while metrics and tracing are off: nothing to do."""

    retry = None

    def __enter__(self) -> _Unwatched:
        return self

    def __exit__(self, *_: object) -> None:
        return None


_UNWATCHED = _Unwatched()


def commit(verb: str) -> CommitWatch | _Unwatched:
    return CommitWatch(verb) if ON.metrics or ON.tracing else _UNWATCHED


def loaded(document: dict[str, Any]) -> None:
    """An instance document a commit read: its ids for the logs, its spawn's link."""
    if document.get("_id") != context.INSTANCE.get():
        return  # another instance (a parent a cascade reads): the verb's own stays
    root, definition = context.of_document(document)
    context.ROOT.set(root)
    context.DEFINITION.set(definition)
    if ON.tracing:
        link_spawn(VERB.get(), document)


def link_spawn(held: VerbSpan | None, document: dict[str, Any]) -> None:
    """The verb span ``held`` links to the spawn that created ``document`` (once)."""
    parent = document.get(SPAWN_TRACE)
    if held is not None and not held.linked and isinstance(parent, str):
        spawned = span_context(parent)
        if spawned is not None:
            held.span.add_link(spawned, {"kinflow.link": "spawned-by"})
            held.linked = True


def traceparent() -> str | None:
    """The current span's trace context as a W3C ``traceparent`` (none outside a trace,
    none with tracing off)."""
    if not ON.tracing:
        return None
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier.get("traceparent")


def span_context(parent: str) -> trace.SpanContext | None:
    """The span a W3C ``traceparent`` names (``None``: malformed). Parsed by hand: the
    propagator's extract costs twice as much, and a round may read hundreds."""
    version, trace_id, span_id, flags = [*parent.split("-"), "", "", ""][:4]
    if len(version) != 2 or len(trace_id) != 32 or len(span_id) != 16 or len(flags) != 2:
        return None
    try:
        found = trace.SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True,
                                  trace_flags=trace.TraceFlags(int(flags, 16)))
    except ValueError:
        return None
    return found if found.is_valid else None


def stamp_children(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The children a commit creates, each recording the commit's trace context."""
    if not ON.tracing or not batch:
        return batch
    parent = traceparent()
    if parent is None:
        return batch
    for document in batch:
        document[SPAWN_TRACE] = parent
    span = trace.get_current_span()
    span.add_event("children created", {"kinflow.children": len(batch)})
    return batch


def owed(document: dict[str, Any], before: dict[str, Any] | None) -> None:
    """An instance ``document`` about to be written: when the commit leaves it owing its
    parent a new stamp (a new ``propagateToken``), it records the commit's trace context
    beside the stamp (``propagateTrace``), for the parent's round to link to."""
    if not ON.tracing:
        return
    token = document.get("propagateToken")
    if token is None or (before is not None and before.get("propagateToken") == token):
        return
    parent = traceparent()
    if parent is None:
        document.pop(PROPAGATE_TRACE, None)  # an older change's: not this stamp's
    else:
        document[PROPAGATE_TRACE] = parent


def with_trace(projection: dict[str, int]) -> dict[str, int]:
    """A projection of children owing a stamp, with their ``propagateTrace`` when tracing."""
    return {**projection, PROPAGATE_TRACE: 1} if ON.tracing else projection


def observed(documents: list[dict[str, Any]]) -> None:
    """Children whose owed stamps the current commit read (``with_trace``): its span links
    to the commit that owed each (at most ``OBSERVED_LINKS``, the first read; a retried
    attempt adds only children not linked yet) and counts them."""
    if not ON.tracing or not documents:
        return
    watch = _COMMIT.get()
    if watch is None or watch.span is None:
        return
    if watch.linked is None:
        watch.linked = set()
    span, linked = watch.span, watch.linked
    for document in documents:
        if len(linked) >= OBSERVED_LINKS:
            break
        parent = document.get(PROPAGATE_TRACE)
        child = span_context(parent) if isinstance(parent, str) else None
        if child is None or (child.trace_id, child.span_id) in linked:
            continue
        linked.add((child.trace_id, child.span_id))
        span.add_link(child, {"kinflow.link": "observed",
                              "kinflow.child_id": str(document.get("_id"))})
    span.set_attribute("kinflow.children_observed", len(documents))
    span.set_attribute("kinflow.children_linked", len(linked))
