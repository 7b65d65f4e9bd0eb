"""``KINFLOW_LOG_FORMAT=json``: one JSON object per line (python-json-logger).

Each line has ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``;
where they apply, ``operation`` (the GraphQL root field), ``instance``,
``root`` and ``definition`` (``context``), ``trace_id`` and ``span_id`` (the
current span, when tracing is on), and ``exc_info`` for an exception. No other
record attribute is written, so what a caller passes in ``extra`` (a token, a
handler's parameters) never reaches a line, and a bearer token inside a
message is masked. The default, ``text``, keeps uvicorn's readable lines.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from pythonjsonlogger.json import JsonFormatter

from kinflow.observability import context

KEPT = ("time", "level", "logger", "message", "exc_info", "stack_info")
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',;]+")


def masked(text: str) -> str:
    return _BEARER.sub(r"\1***", text)


class JsonLines(JsonFormatter):
    """kinflow's JSON log line (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("timestamp", "time")
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        super().__init__("%(levelname)s %(name)s %(message)s", *args, **kwargs)

    def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord,
                   message_dict: dict[str, Any]) -> None:
        super().add_fields(log_data, record, message_dict)
        for key in [key for key in log_data if key not in KEPT]:
            del log_data[key]
        if isinstance(log_data.get("message"), str):
            log_data["message"] = masked(log_data["message"])
        log_data.update(context.current())
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            log_data["trace_id"] = format(span.trace_id, "032x")
            log_data["span_id"] = format(span.span_id, "016x")


def uvicorn_options(log_format: str, level: str = "INFO") -> dict[str, Any]:
    """What ``kinflow serve`` adds to uvicorn's options: its logging configuration, for JSON."""
    if log_format != "json":
        return {}  # uvicorn's own readable lines
    return {"log_config": uvicorn_config(level)}


def announce(log_format: str, line: str, show: Callable[[str], None]) -> None:
    """A start-up line: shown as it is, or logged (so JSON lines stay JSON)."""
    if log_format == "json":
        configure(log_format)
        logging.getLogger("kinflow.cli").info(line)
    else:
        show(line)


def uvicorn_config(level: str = "INFO") -> dict[str, Any]:
    """uvicorn's logging configuration for JSON lines: its loggers and the root's."""
    handler = ["json"]
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonLines"}},
        "handlers": {"json": {"class": "logging.StreamHandler", "formatter": "json",
                              "stream": "ext://sys.stderr"}},
        "loggers": {
            "uvicorn": {"handlers": handler, "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": handler, "level": level, "propagate": False},
        },
        "root": {"handlers": handler, "level": level},
    }


def configure(log_format: str, level: int = logging.INFO) -> None:
    """JSON lines on stderr for a process uvicorn does not configure (``kinflow worker``)."""
    if log_format != "json":
        return
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
