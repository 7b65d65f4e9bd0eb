"""``/metrics`` scraped during a cohort run and parsed with prometheus_client's parser."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from starlette.testclient import TestClient

from kinflow.http.app import create_app
from kinflow.observability import gauges
from tests.api.conftest import TOKENS, make_settings
from tests.observability import cohort
from tests.support import free_port

SIZE = 6
ADMIN = "admin-token-for-tests"


def scrape(client: TestClient, token: str | None = None) -> list[Sample]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return [sample for family in text_string_to_metric_families(response.text)
            for sample in family.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 if none)."""
    return sum(s.value for s in samples if s.name == name
               and all(s.labels.get(k) == v for k, v in labels.items()))


@pytest.fixture
def secured_client(lake_uri: str, database: str, monkeypatch: pytest.MonkeyPatch
                   ) -> Iterator[TestClient]:
    monkeypatch.setattr(gauges, "REFRESH_SECONDS", 0.0)  # every scrape reads the cohorts
    with TestClient(create_app(make_settings(lake_uri, database, api_tokens=TOKENS))) as client:
        yield client


def test_a_cohort_run_moves_the_counters_by_exactly_its_work(
        secured_client: TestClient, lake_uri: str, database: str) -> None:
    client = secured_client
    before = scrape(client, ADMIN)
    parent, children = cohort.spawn(client, lake_uri, database, SIZE, ADMIN)
    during = scrape(client, ADMIN)
    # the cohort in aggregate: its rows by status, never a label per instance
    assert value(during, "kinflow_cohort_rows", status="active") == SIZE
    assert value(during, "kinflow_cohorts_open") == 1
    for child in children:
        cohort.fire(client, child, ADMIN)
    assert cohort.stage(client, parent, ADMIN) == "over"
    after = scrape(client, ADMIN)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    fires = {"operation": "fireAction", "type": "mutation", "code": "ok"}
    assert moved("kinflow_graphql_operations_total", **fires) == SIZE
    assert moved("kinflow_graphql_operations_total", operation="startInstance",
                 type="mutation", code="ok") == 1
    assert moved("kinflow_graphql_operation_seconds_count", operation="fireAction",
                 type="mutation") == SIZE
    assert moved("kinflow_engine_verbs_total", verb="fireAction", code="ok") == SIZE
    assert moved("kinflow_engine_verb_seconds_count", verb="fireAction") == SIZE
    assert moved("kinflow_engine_verbs_total", verb="startInstance", code="ok") == 1
    # each child's fire commits at least once; the parent's rounds commit too
    assert moved("kinflow_commits_total", verb="fireAction", outcome="ok") >= SIZE
    assert moved("kinflow_commit_seconds_count", verb="fireAction") >= SIZE
    assert moved("kinflow_lake_command_seconds_count", command="commitTransaction") >= SIZE
    assert moved("kinflow_lake_command_seconds_count", command="find") > 0
    assert value(after, "kinflow_cohort_rows", status="active") == 0
    # histograms have samples in their buckets
    assert moved("kinflow_graphql_operation_seconds_bucket", operation="fireAction",
                 type="mutation", le="+Inf") == SIZE
    ids = {parent, *children}
    for sample in after:
        for label, text in sample.labels.items():
            assert text not in ids, (sample.name, label)
            assert not re.fullmatch(r"[0-9a-f]{16,}", text), (sample.name, label, text)


def test_a_refusal_counts_under_its_code(secured_client: TestClient) -> None:
    before = scrape(secured_client, ADMIN)
    response = secured_client.post(
        "/graphql", json={"query": cohort.FIRE, "variables": {"id": "no-such-instance"}},
        headers={"Authorization": f"Bearer {ADMIN}"})
    code = response.json()["errors"][0]["extensions"]["code"]
    after = scrape(secured_client, ADMIN)
    labels = {"operation": "fireAction", "type": "mutation", "code": code}
    assert (value(after, "kinflow_graphql_operations_total", **labels)
            - value(before, "kinflow_graphql_operations_total", **labels)) == 1


def test_metrics_follow_the_api_token_rules(secured_client: TestClient) -> None:
    assert secured_client.get("/metrics").status_code == 401
    wrong = secured_client.get("/metrics", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert scrape(secured_client, "view-token-for-tests")  # any role may scrape


def test_metrics_off_answers_not_found(lake_uri: str, database: str) -> None:
    try:
        with TestClient(create_app(make_settings(lake_uri, database, metrics=False))) as client:
            assert client.get("/metrics").status_code == 404
    finally:
        create_app(make_settings(lake_uri, database))  # metrics back on for later tests


def test_a_metrics_port_serves_them_without_a_token(lake_uri: str, database: str) -> None:
    port = free_port()
    settings = make_settings(lake_uri, database, api_tokens=TOKENS, metrics_port=port)
    with TestClient(create_app(settings)) as client:
        assert client.get("/metrics", headers={
            "Authorization": f"Bearer {ADMIN}"}).status_code == 404  # not on the API's port
        scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
        assert scraped.status_code == 200
        names = {family.name for family in text_string_to_metric_families(scraped.text)}
        assert {"kinflow_graphql_operations", "kinflow_cohort_rows"} <= names
    with pytest.raises(httpx.ConnectError):  # stopped with the app
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
