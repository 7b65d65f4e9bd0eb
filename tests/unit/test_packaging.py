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
    from kinflow.http.tokens import load_tokens

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    raw = compose["services"]["kinflow"]["environment"]["KINFLOW_API_TOKENS"]
    table = load_tokens(Settings(api_tokens=raw, _env_file=None))  # type: ignore[call-arg]
    actor = table.lookup("demo-admin-token")
    assert table.enabled and actor.id == "demo" and "admin" in actor.roles
    assert "demo-admin-token" in (ROOT / "README.md").read_text()


def _nginx_values(config: str, directive: str) -> list[str]:
    """Every value of ``directive`` in an nginx config (one directive per line)."""
    values = []
    for line in config.splitlines():
        words = line.strip().rstrip(";").split()
        if words and words[0] == directive:
            values.append(" ".join(words[1:]))
    return values


def test_compose_scale_profile_puts_two_apis_and_two_workers_behind_one_port() -> None:
    import ipaddress

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    scale = {name for name, svc in services.items() if "scale" in svc.get("profiles", [])}
    assert scale == {"api-1", "api-2", "worker-1", "worker-2", "proxy"}
    assert "profiles" not in services["kinflow"] and "profiles" not in services["mongo"]

    apis = [services["api-1"], services["api-2"]]
    workers = [services["worker-1"], services["worker-2"]]
    for api in apis:
        assert api["command"] == ["kinflow", "serve", "--no-worker"]
        assert "/healthz" in " ".join(api["healthcheck"]["test"])
        assert "ports" not in api  # reached only through the proxy
    for worker in workers:
        assert worker["command"] == ["kinflow", "worker"] and "ports" not in worker
    envs = [svc["environment"] for svc in apis + workers]
    assert all(env == envs[0] for env in envs)  # one lake, one token table for all
    assert envs[0]["KINFLOW_MONGODB_URI"] == services["kinflow"]["environment"][
        "KINFLOW_MONGODB_URI"]
    for svc in apis + workers:
        assert svc["depends_on"]["mongo"]["condition"] == "service_healthy"

    proxy = services["proxy"]
    (published,) = proxy["ports"]
    host, host_port, container_port = published.split(":")
    assert host == "127.0.0.1" and host_port not in " ".join(services["kinflow"]["ports"])
    assert {name: dep["condition"] for name, dep in proxy["depends_on"].items()} == {
        "api-1": "service_healthy", "api-2": "service_healthy",
        "worker-1": "service_started", "worker-2": "service_started"}
    (mount,) = proxy["configs"]
    config = compose["configs"][mount["source"]]["content"].replace("$$", "$")
    assert mount["target"].startswith("/etc/nginx/")
    assert _nginx_values(config, "listen") == [container_port]
    api_port = envs[0]["KINFLOW_PORT"]
    servers = {v.split()[0] for v in _nginx_values(config, "server") if v != "{"}
    assert servers == {f"api-1:{api_port}", f"api-2:{api_port}"}
    assert _nginx_values(config, "proxy_pass") == ["http://kinflow_api"]
    assert "kinflow_api {" in config.replace("upstream ", "")
    headers = _nginx_values(config, "proxy_set_header")
    assert "Upgrade $http_upgrade" in headers and "Connection $connection_upgrade" in headers
    assert "X-Forwarded-For $remote_addr" in headers  # the client, never a header it sent
    assert _nginx_values(config, "proxy_http_version") == ["1.1"]  # websockets need 1.1
    body = _nginx_values(config, "client_max_body_size")[0]
    assert int(body.rstrip("m")) * 1024 * 1024 >= Settings(_env_file=None).max_request_bytes  # type: ignore[call-arg]

    # the APIs believe X-Forwarded-For from the proxy's fixed address only
    address = proxy["networks"]["scale"]["ipv4_address"]
    subnet = compose["networks"]["scale"]["ipam"]["config"][0]["subnet"]
    assert ipaddress.ip_address(address) in ipaddress.ip_network(subnet)
    assert envs[0]["KINFLOW_FORWARDED_ALLOW_IPS"] == address
    assert all("scale" in api["networks"] for api in apis)
