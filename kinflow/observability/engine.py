"""Engine hooks: a verb, a commit, an instance loaded, the children a spawn creates.

* ``verb``: the ``verb <name>`` span and the verb metrics around an engine verb
  run to rest; sets the instance id the logs carry.
* ``commit``: the ``commit <verb>`` span (each retried attempt an event on it)
  and the commit metrics around one ``Lake.transaction``.
* ``loaded``: the verb's own instance was read: its root and definition go on
  the logs, and, when the spawn that created it was traced, the verb's span
  links to that spawn.
* ``stamp_children``: the children a commit creates record its trace context
  (``spawnTrace``, a W3C ``traceparent``), so their own spans can link back.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from pymongo.errors import ConnectionFailure

from kinflow.errors import ConcurrentModification, KinflowError, LakeUnavailable
from kinflow.observability import context, metrics, tracing
from kinflow.observability.switch import ON

T = TypeVar("T")
SPAWN_TRACE = "spawnTrace"  # the field a created child keeps its spawn's traceparent in
_W3C = TraceContextTextMapPropagator()


class _VerbSpan:
    __slots__ = ("linked", "span")

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        self.linked = False


_VERB: ContextVar[_VerbSpan | None] = ContextVar("kinflow_verb_span", default=None)


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
            with tracing.tracer().start_as_current_span(
                    f"verb {name}", attributes={"kinflow.verb": name,
                                                "kinflow.instance_id": instance_id}) as span:
                held = _VERB.set(_VerbSpan(span))
                try:
                    return await work
                finally:
                    _VERB.reset(held)
        return await work
    except BaseException as exc:
        failure = exc
        raise
    finally:
        context.leave_instance(tokens)
        if ON.metrics:
            metrics.child(metrics.VERBS, name, outcome_code(failure)).inc()
            metrics.child(metrics.VERB_SECONDS, name).observe(time.perf_counter() - started)


class CommitWatch:
    """One commit, watched: ``with commit(verb) as seen``, then ``on_retry=seen.retry``."""

    __slots__ = ("_span_cm", "attempts", "span", "started", "verb")

    def __init__(self, verb: str) -> None:
        self.verb = verb
        self.attempts = 1
        self.span: trace.Span | None = None
        self._span_cm: Any = None
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
        held = _VERB.get()
        parent = document.get(SPAWN_TRACE)
        if held is not None and not held.linked and isinstance(parent, str):
            spawn = trace.get_current_span(_W3C.extract({"traceparent": parent}))
            spawned = spawn.get_span_context()
            if spawned.is_valid:
                held.span.add_link(spawned, {"kinflow.link": "spawned-by"})
                held.linked = True


def stamp_children(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The children a commit creates, each recording the commit's trace context."""
    if not ON.tracing or not batch:
        return batch
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    parent = carrier.get("traceparent")
    if parent is None:
        return batch
    for document in batch:
        document[SPAWN_TRACE] = parent
    span = trace.get_current_span()
    span.add_event("children created", {"kinflow.children": len(batch)})
    return batch
