"""``KINFLOW_LOG_FORMAT=json``: every line a JSON object with the fields that apply, no secret."""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client.parser import text_string_to_metric_families

from kinflow.observability import context, logs, tracing
from tests.support import free_port, running

SECRET = "s3cret-token-value"
HANDLERS = f'''
import logging

log = logging.getLogger("obs-handlers")


def work(call):
    log.warning("working on %s", call.params["locale"], extra={{"token": "{SECRET}"}})
    return {{}}


def register(engine):
    engine.register_handler("obs-log", work)
'''
LOGGED: dict[str, Any] = {
    "name": "obs-logged", "title": "Logs from its effect", "initialStage": "working",
    "fields": [{"name": "locale", "type": "string", "initialValue": {"type": "input"}}],
    "stages": [
        {"name": "working", "activities": [{"name": "work", "actions": [
            {"name": "request", "when": "true",
             "effects": [{"name": "obs-log", "bindings": {"locale": "$fields.locale"}}]},
            {"name": "store", "when": "$effectStatus['obs-log'] == 'done'", "status": "done"}]}],
         "transitions": [{"name": "to-done", "to": "done"}]},
        {"name": "done"},
    ],
}
REQUIRED = ("time", "level", "logger", "message")


def test_a_formatted_line_has_the_ids_that_apply_and_no_extra() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonLines())
    logger = logging.getLogger("kinflow.test-json")
    logger.addHandler(handler)
    provider = TracerProvider()
    tracing.install(provider)
    try:
        tokens = context.enter_instance("inst-1")
        named = context.OPERATION.set("fireAction")
        with tracing.tracer().start_as_current_span("work") as span:
            logger.warning("sent Bearer %s along", SECRET, extra={"params": {"pin": SECRET}})
        context.OPERATION.reset(named)
        context.leave_instance(tokens)
        logger.warning("outside")
    finally:
        logger.removeHandler(handler)
        tracing.install(None)
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    assert SECRET not in stream.getvalue()
    assert inside["message"] == "sent Bearer *** along" and inside["level"] == "WARNING"
    assert inside["instance"] == "inst-1" and inside["operation"] == "fireAction"
    assert inside["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert set(outside) == set(REQUIRED)


@pytest.mark.skipif(bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")), reason="embedded only")
def test_serve_writes_only_json_lines(lake_uri: str, database: str, tmp_path: Path) -> None:
    handlers = tmp_path / "handlers.py"
    handlers.write_text(HANDLERS)
    port = free_port()
    env = {**os.environ, "KINFLOW_MONGODB_URI": lake_uri, "KINFLOW_DATABASE": database,
           "KINFLOW_PORT": str(port), "KINFLOW_LOG_FORMAT": "json",
           "KINFLOW_EFFECT_HANDLERS": str(handlers), "KINFLOW_WORKER_INTERVAL": "0.2",
           "KINFLOW_DATA_DIR": str(tmp_path / "data")}
    base = f"http://127.0.0.1:{port}"
    output = tmp_path / "serve.log"
    with output.open("wb") as sink, running(
            [sys.executable, "-m", "kinflow.cli", "serve"], env=env,
            health_url=f"{base}/healthz", output=sink):
        with httpx.Client(base_url=base, timeout=20) as http:
            def call(query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
                body: dict[str, Any] = http.post("/graphql", json={
                    "query": query, "variables": variables or {}},
                    headers={"Authorization": f"Bearer {SECRET}"}).json()
                return body
            call("mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }",
                 {"d": [LOGGED]})
            started = call('mutation { startInstance(definition: "obs-logged", '
                           'fields: {locale: "de"}) { instance { id } } }')
            instance = started["data"]["startInstance"]["instance"]["id"]
            call("{ nope }")  # an invalid operation
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                found = call("query($id: ID!) { instance(id: $id) { currentStage } }",
                             {"id": instance})
                if found["data"]["instance"]["currentStage"] == "done":
                    break
                time.sleep(0.2)
            scraped = http.get("/metrics")
            assert scraped.status_code == 200
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(scraped.text)
               for s in family.samples}
    # the worker ran the effect: the heartbeat and the handler are counted
    assert samples[("kinflow_effects_finished_total",
                    (("effect", "obs-log"), ("outcome", "done")))] == 1
    assert samples[("kinflow_effect_handler_seconds_count", (("effect", "obs-log"),))] == 1
    assert samples[("kinflow_heartbeat_passes_total", (("outcome", "ok"),))] >= 1
    assert samples[("kinflow_heartbeat_items_total",
                    (("kind", "effects"), ("outcome", "done")))] >= 1
    lines = [line for line in output.read_text().splitlines() if line.strip()]
    assert lines
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    for record in records:
        assert all(isinstance(record.get(key), str) for key in REQUIRED), record
    assert SECRET not in output.read_text()
    (worked,) = [r for r in records if r["message"] == "working on de"]
    assert worked["instance"] == instance and worked["logger"] == "obs-handlers"
    assert any(r["logger"] == "uvicorn.access" for r in records)
