"""Reading finished spans as trees: a span's parent, a trace's spans, the spans a span links to."""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry.sdk.trace import ReadableSpan


def parent_of(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> ReadableSpan | None:
    return by_id.get(span.parent.span_id) if span.parent is not None else None


def by_id(spans: Iterable[ReadableSpan]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans}


def named(spans: Iterable[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def key(span: ReadableSpan) -> tuple[int, int]:
    return span.context.trace_id, span.context.span_id


def links(span: ReadableSpan, kind: str) -> set[tuple[int, int]]:
    """The (trace id, span id) of each span ``span`` links to as ``kind`` (kinflow.link)."""
    return {(link.context.trace_id, link.context.span_id) for link in span.links
            if link.attributes is not None and link.attributes.get("kinflow.link") == kind}
