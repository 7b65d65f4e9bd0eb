"""The files a user runs first: docker-compose wiring, the CI entry point, settings."""

from __future__ import annotations

from pathlib import Path

import yaml

from kinflow.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_compose_wires_the_api_to_a_healthy_replica_set() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    mongo, api = compose["services"]["mongo"], compose["services"]["kinflow"]
    assert "--replSet" in mongo["command"]
    assert "rs.initiate" in " ".join(mongo["healthcheck"]["test"])
    assert api["depends_on"]["mongo"]["condition"] == "service_healthy"
    uri = api["environment"]["KINFLOW_MONGODB_URI"]
    assert uri.startswith("mongodb://mongo:27017/") and "replicaSet=rs0" in uri
    assert api["build"] == "."
    assert all(port.startswith("127.0.0.1:") for port in api["ports"] + mongo["ports"])
    assert (ROOT / "Dockerfile").read_text().count("kinflow") >= 2


def test_ci_runs_the_readme_test_command() -> None:
    run = (ROOT / ".ci" / "run").read_text()
    assert "set -euo pipefail" in run and "make test" in run
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make demo" in readme


def test_settings_defaults_and_env(monkeypatch: object) -> None:
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.delenv("KINFLOW_MONGODB_URI", raising=False)
    defaults = Settings(_env_file=None)  # type: ignore[call-arg]
    assert defaults.mongodb_uri is None and defaults.database == "kinflow"
    assert defaults.dataset == "production" and defaults.host == "127.0.0.1"
    assert defaults.port == 8080 and str(defaults.data_dir) == ".kinflow"
    monkeypatch.setenv("KINFLOW_PORT", "9090")
    monkeypatch.setenv("KINFLOW_DATASET", "staging")
    configured = Settings(_env_file=None)  # type: ignore[call-arg]
    assert configured.port == 9090 and configured.dataset == "staging"


def test_compose_demo_token_is_an_admin() -> None:
    from kinflow.auth import load_tokens

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    raw = compose["services"]["kinflow"]["environment"]["KINFLOW_API_TOKENS"]
    table = load_tokens(Settings(api_tokens=raw, _env_file=None))  # type: ignore[call-arg]
    actor = table.lookup("demo-admin-token")
    assert table.enabled and actor.id == "demo" and "admin" in actor.roles
    assert "demo-admin-token" in (ROOT / "README.md").read_text()
