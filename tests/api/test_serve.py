"""`kinflow serve` as a user runs it: a real process on the embedded lake."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pymongo import MongoClient

from tests.support import free_port, running

pytestmark = [
    pytest.mark.lake,  # starts a daemon of its own
    pytest.mark.skipif(
        bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")), reason="embedded lake only"
    ),
]


def _get(url: str) -> tuple[int, dict[str, object]]:
    with urllib.request.urlopen(url, timeout=2) as response:
        return response.status, json.loads(response.read())


@contextmanager
def serving(data_dir: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "KINFLOW_DATA_DIR": str(data_dir), "KINFLOW_PORT": str(port)}
    env.pop("KINFLOW_MONGODB_URI", None)
    base = f"http://127.0.0.1:{port}"
    with running([sys.executable, "-m", "kinflow.cli", "serve"], env=env,
                 health_url=f"{base}/healthz"):  # fmt: skip
        yield base


def test_serve_reports_health_and_the_lake_survives_a_restart(data_dir: Path) -> None:
    with serving(data_dir) as base:
        status, body = _get(f"{base}/healthz")
        lake = dict(body["lake"])  # type: ignore[call-overload]
        daemon = lake.pop("daemon")
        assert status == 200 and lake == {
            "reachable": True, "embedded": True, "database": "kinflow", "dataset": "production",
        }  # fmt: skip
        assert daemon["state"] == "up" and daemon["owner"] is True and daemon["restarts"] == 0
        state = json.loads((data_dir / "lake.json").read_text())
        client: MongoClient[dict[str, object]] = MongoClient(f"mongodb://127.0.0.1:{state['port']}")
        client.kinflow.production.insert_one({"_id": "kept", "_type": "note"})
        client.close()
    assert not (data_dir / "lake.json").exists()  # the daemon was stopped with the server
    with serving(data_dir):
        state = json.loads((data_dir / "lake.json").read_text())
        client = MongoClient(f"mongodb://127.0.0.1:{state['port']}")
        assert client.kinflow.production.find_one({"_id": "kept"}) is not None
        client.close()


def test_serve_refuses_a_public_address_without_tokens(data_dir: Path) -> None:
    env = {**os.environ, "KINFLOW_DATA_DIR": str(data_dir), "KINFLOW_HOST": "0.0.0.0"}
    result = subprocess.run(
        [sys.executable, "-m", "kinflow.cli", "serve"], env=env, capture_output=True,
        text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert "refusing to bind 0.0.0.0" in result.stderr
    assert "Traceback" not in result.stderr
