"""Turning metrics and tracing on or off for this process (``create_app`` calls it)."""

from __future__ import annotations

from collections.abc import Mapping

from kinflow.observability import tracing
from kinflow.observability.switch import ON
from kinflow.settings import Settings


def configure(settings: Settings, environ: Mapping[str, str]) -> None:
    """Metrics as ``KINFLOW_METRICS`` says; tracing as the ``OTEL_*`` variables say."""
    ON.metrics = settings.metrics
    ON.tracing = tracing.configure_from(environ)
