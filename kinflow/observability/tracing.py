"""The tracer: a no-op one unless an exporter is configured by the standard ``OTEL_*`` variables.

``OTEL_TRACES_EXPORTER``: ``otlp`` (the ``otlp`` extra: OTLP over HTTP, to
``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``),
``console`` (spans printed as JSON on stdout), ``memory`` (kept in memory, the
newest 10,000: for measuring what tracing costs), or ``none``. Unset, an
``OTEL_EXPORTER_OTLP_ENDPOINT`` alone means ``otlp``; neither means off.
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` name the process, as
the SDK reads them.

The provider is kinflow's own (not the global one), so a test can put one
with an in-memory exporter in place (``install``) and take it away again.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from opentelemetry import trace

from kinflow.observability.switch import ON

if TYPE_CHECKING:  # the SDK is imported only when tracing is turned on
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger("kinflow.observability")
NAME = "kinflow"
KEPT_IN_MEMORY = 10_000

_NOOP: trace.Tracer = trace.NoOpTracer()
_tracer: trace.Tracer = _NOOP
_provider: TracerProvider | None = None


def recent_spans(keep: int = KEPT_IN_MEMORY) -> SpanExporter:
    """An exporter keeping the newest spans in memory (``OTEL_TRACES_EXPORTER=memory``)."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class RecentSpans(SpanExporter):
        def __init__(self) -> None:
            self.spans: collections.deque[ReadableSpan] = collections.deque(maxlen=keep)

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            self.spans.extend(spans)
            return SpanExportResult.SUCCESS

    return RecentSpans()


def tracer() -> trace.Tracer:
    return _tracer


def install(provider: TracerProvider | None) -> None:
    """Trace through ``provider`` from now on (``None``: back to the no-op tracer)."""
    global _tracer, _provider
    if _provider is not None and _provider is not provider:
        _provider.shutdown()
    _provider = provider
    _tracer = provider.get_tracer(NAME) if provider is not None else _NOOP
    ON.tracing = provider is not None


def exporter_for(environ: Mapping[str, str]) -> SpanExporter | None:
    """The exporter the environment asks for, or ``None`` for no tracing."""
    chosen = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not chosen:
        endpoint = (environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                    or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        chosen = "otlp" if endpoint else "none"
    first = chosen.split(",")[0].strip()
    if first == "none":
        return None
    if first == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if first == "memory":
        return recent_spans()
    if first == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            log.warning("OTEL_TRACES_EXPORTER=otlp needs the otlp extra "
                        "(pip install 'kinflow[otlp]'); tracing stays off")
            return None
        return OTLPSpanExporter()
    log.warning("OTEL_TRACES_EXPORTER=%s is not one kinflow knows (otlp, console, memory, "
                "none); tracing stays off", first)
    return None


def configure_from(environ: Mapping[str, str]) -> bool:
    """Set up tracing as the environment says; whether it is on.

    A provider already installed (a test's) is kept: the environment only ever
    turns tracing on.
    """
    if _provider is not None:
        return True
    exporter = exporter_for(environ)
    if exporter is None:
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create(
        {"service.name": environ.get("OTEL_SERVICE_NAME") or NAME}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    install(provider)
    return True
