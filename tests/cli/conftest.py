"""The CLI reads its settings from the environment: point it at the test lake."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pymongo import MongoClient


@pytest.fixture
def cli_env(lake_uri: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    database = f"cli_{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("KINFLOW_MONGODB_URI", lake_uri)
    monkeypatch.setenv("KINFLOW_DATABASE", database)
    monkeypatch.setenv("KINFLOW_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "200")
    yield database
    client: MongoClient[dict[str, object]] = MongoClient(lake_uri)
    client.drop_database(database)
    client.close()
