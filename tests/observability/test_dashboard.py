"""The Grafana dashboard and the compose file's ``observe`` profile stay true to the metrics."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from kinflow.observability import gauges  # noqa: F401 - registers the scrape-time figures
from kinflow.observability.metrics import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "examples" / "grafana" / "kinflow.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"),
            "gauge": ("",)}


def exported() -> dict[str, str]:
    """Every series name ``/metrics`` may carry -> its metric family."""
    names = {}
    for family in REGISTRY.collect():
        for suffix in SUFFIXES[family.type]:
            names[family.name + suffix] = family.name
    return names


def expressions() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]]


def test_every_panel_queries_exported_metrics_and_every_metric_has_a_panel() -> None:
    names = exported()
    used = {name for expr in expressions() for name in re.findall(r"\bkinflow_[a-z_]+", expr)}
    assert used and used <= set(names), sorted(used - set(names))
    assert {names[name] for name in used} == set(names.values())


def test_the_dashboard_is_importable() -> None:
    board = json.loads(DASHBOARD.read_text())
    assert board["title"] == "kinflow" and board["uid"]
    (variable,) = board["templating"]["list"]
    assert variable["type"] == "datasource" and variable["query"] == "prometheus"
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"] and all(t["datasource"] == panel["datasource"]
                                        for t in panel["targets"])


def test_compose_observe_profile_scrapes_kinflow_and_shows_the_dashboard() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    observe = {name for name, svc in services.items() if "observe" in svc.get("profiles", [])}
    assert observe == {"prometheus", "grafana"}
    kinflow = services["kinflow"]
    tokens = json.loads(kinflow["environment"]["KINFLOW_API_TOKENS"])

    prometheus = services["prometheus"]
    (mount,) = prometheus["configs"]
    config = yaml.safe_load(compose["configs"][mount["source"]]["content"])
    assert mount["target"] == "/etc/prometheus/prometheus.yml"
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["authorization"]["credentials"] in tokens  # the API's own token rules
    container_port = kinflow["ports"][0].split(":")[-1]
    assert job["static_configs"][0]["targets"] == [f"kinflow:{container_port}"]
    assert all(port.startswith("127.0.0.1:") for port in prometheus["ports"])

    grafana = services["grafana"]
    configs = {m["target"]: compose["configs"][m["source"]]["content"]
               for m in grafana["configs"]}
    (source,) = yaml.safe_load(configs[
        "/etc/grafana/provisioning/datasources/kinflow.yml"])["datasources"]
    assert source["type"] == "prometheus"
    assert source["url"] == f"http://prometheus:{prometheus['ports'][0].split(':')[-1]}"
    (provider,) = yaml.safe_load(configs[
        "/etc/grafana/provisioning/dashboards/kinflow.yml"])["providers"]
    (volume,) = grafana["volumes"]
    host, container, _ = volume.split(":")
    assert (ROOT / host).resolve() == DASHBOARD
    assert container.startswith(provider["options"]["path"] + "/")
    assert all(port.startswith("127.0.0.1:") for port in grafana["ports"])
