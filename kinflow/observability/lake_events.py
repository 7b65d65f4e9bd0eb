"""Lake round trips: a pymongo command listener on every lake client.

Each command the driver sends is counted and timed by name (``find``,
``update``, ``commitTransaction`` ...), and, inside a trace, becomes a
``lake <command>`` client span under whatever span is current (a commit,
a read). Outside a trace (the driver's own housekeeping, a scrape) no span
is made. The command's contents are never recorded: only its name, database
and collection.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind
from pymongo import monitoring

from kinflow.observability import metrics, tracing
from kinflow.observability.switch import ON

OPEN_SPANS = 10_000  # lake spans awaiting their reply, at most
COMMANDS = frozenset({
    "find", "getMore", "insert", "update", "delete", "findAndModify", "aggregate", "count",
    "distinct", "commitTransaction", "abortTransaction", "endSessions", "killCursors",
    "createIndexes", "listIndexes", "dropIndexes", "create", "drop", "listCollections",
    "ping", "hello", "isMaster", "serverStatus", "dropDatabase", "bulkWrite",
})


def command_label(name: str) -> str:
    return name if name in COMMANDS else "other"


class _Kept:
    """A command's labelled children, looked up once: its label, ok count and times (a
    failed count is looked up when one fails, so none is exported before)."""

    __slots__ = ("label", "ok", "seconds")

    def __init__(self, command: str) -> None:
        self.label = command
        self.ok = metrics.child(metrics.LAKE_COMMANDS, command, "ok")
        self.seconds = metrics.child(metrics.LAKE_SECONDS, command)


_KEPT: dict[str, _Kept] = {}


def kept(name: str) -> _Kept:
    """The children of the command ``name`` (a name the driver sends; unknown ones share
    ``other``'s, and only known names are keys, so the dict stays as small as the labels)."""
    found = _KEPT.get(name)
    if found is None:
        label = command_label(name)
        found = _KEPT.get(label) or _Kept(label)
        _KEPT[label] = found
    return found


class LakeCommands(monitoring.CommandListener):
    """Counts, times and (inside a trace) spans every lake command."""

    def __init__(self) -> None:
        self.open: dict[tuple[Any, int], trace.Span] = {}

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if not ON.tracing:
            return
        if not trace.get_current_span().get_span_context().is_valid:
            return  # not part of any traced work
        command = command_label(event.command_name)
        collection = event.command.get(event.command_name)
        attributes: dict[str, Any] = {"db.system": "mongodb", "db.operation.name": command,
                                      "db.namespace": event.database_name}
        if isinstance(collection, str):
            attributes["db.collection.name"] = collection
        span = tracing.tracer().start_span(f"lake {command}", kind=SpanKind.CLIENT,
                                           attributes=attributes)
        if len(self.open) >= OPEN_SPANS:  # replies never seen (a client closed mid-command)
            self.open.clear()
        self.open[(event.connection_id, event.request_id)] = span

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        self._finished(event, "ok")

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self._finished(event, "failed")

    def _finished(self, event: monitoring.CommandSucceededEvent | monitoring.CommandFailedEvent,
                  outcome: str) -> None:
        if ON.metrics:
            children = kept(event.command_name)
            if outcome == "ok":
                children.ok.inc()
            else:
                metrics.child(metrics.LAKE_COMMANDS, children.label, outcome).inc()
            children.seconds.observe(event.duration_micros / 1e6)
        if self.open:
            span = self.open.pop((event.connection_id, event.request_id), None)
            if span is not None:
                if outcome != "ok":
                    span.set_status(trace.StatusCode.ERROR)
                span.end()


LISTENER = LakeCommands()


def listeners() -> list[monitoring.CommandListener]:
    """The listeners a new lake client gets (``storage/connect.make_client``): none while
    metrics and tracing are both off, so the driver then builds no events at all."""
    return [LISTENER] if ON.metrics or ON.tracing else []
