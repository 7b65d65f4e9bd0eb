"""`kinflow serve` trusts no forwarded client address unless a proxy is named.

uvicorn's default trusts ``X-Forwarded-For`` from loopback, so a local caller
could give every wrong-token guess a fresh address and never be throttled.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support import free_port, running

pytestmark = [
    pytest.mark.lake,  # starts a daemon of its own
    pytest.mark.skipif(
        bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")), reason="embedded lake only"
    ),
]
TOKENS = json.dumps({"a-long-enough-admin-token": {"id": "ops", "roles": ["admin"]}})


def _guess(base: str, forwarded_for: str) -> int:
    request = urllib.request.Request(
        f"{base}/graphql", data=b'{"query": "{ definitions { name } }"}', method="POST",
        headers={"Content-Type": "application/json", "X-Forwarded-For": forwarded_for,
                 "Authorization": "Bearer a-wrong-guess-of-sixteen-chars"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)


def _serve(data_dir: Path, **extra: str) -> tuple[list[str], dict[str, str], str]:
    port = free_port()
    env = {**os.environ, "KINFLOW_DATA_DIR": str(data_dir), "KINFLOW_PORT": str(port),
           "KINFLOW_API_TOKENS": TOKENS, "KINFLOW_AUTH_MAX_FAILURES": "3",
           "KINFLOW_WORKER": "false", **extra}  # fmt: skip
    env.pop("KINFLOW_MONGODB_URI", None)
    env.pop("FORWARDED_ALLOW_IPS", None)
    return [sys.executable, "-m", "kinflow.cli", "serve"], env, f"http://127.0.0.1:{port}"


def test_a_forged_forwarded_address_does_not_escape_the_throttle(data_dir: Path) -> None:
    command, env, base = _serve(data_dir)
    with running(command, env=env, health_url=f"{base}/healthz"):
        answers = [_guess(base, f"203.0.113.{n}") for n in range(6)]
    assert answers[:3] == [401, 401, 401]
    assert answers[3:] == [429, 429, 429]


def test_a_named_proxy_forwards_its_clients_addresses(data_dir: Path) -> None:
    command, env, base = _serve(data_dir, KINFLOW_FORWARDED_ALLOW_IPS="127.0.0.1")
    with running(command, env=env, health_url=f"{base}/healthz"):
        answers = [_guess(base, f"203.0.113.{n}") for n in range(6)]
    assert answers == [401] * 6  # each client address has its own count
