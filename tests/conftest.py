"""Shared fixtures: one embedded lake per test session, a fresh database per test.

Set ``KINFLOW_TEST_MONGODB_URI`` to run the same suite against a real MongoDB
replica set instead of the embedded daemon.

Every test that asks for the lake (``lake_uri`` or any fixture built on it) is
marked ``lake`` at collection, so ``-m "not lake"`` never starts a daemon;
``make unit`` also sets ``KINFLOW_NO_EMBEDDED_LAKE`` so a test that starts one by
other means fails instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import AsyncMongoClient

from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.connect import make_client
from kinflow.storage.embedded import EmbeddedLake

LAKE_FIXTURE = "lake_uri"


#: folders whose files take longest (processes killed and restarted, browsers): under
#: pytest-xdist (``make test``) they are handed out first, so no long file starts last
LONG_FIRST = ("tests/reliability/", "tests/browser/", "tests/lake/")


def _long_first(item: pytest.Item) -> int:
    path = item.nodeid
    return next((n for n, folder in enumerate(LONG_FIRST) if path.startswith(folder)),
                len(LONG_FIRST))  # fmt: skip


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``lake`` every test whose fixtures reach the lake, whatever its file says."""
    for item in items:
        if LAKE_FIXTURE in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.lake)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker collects, and sorts, alike
        items.sort(key=_long_first)


@pytest.fixture(scope="session")
def lake_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    external = os.environ.get("KINFLOW_TEST_MONGODB_URI")
    if external:
        yield external
        return
    daemon = EmbeddedLake(tmp_path_factory.mktemp("lake"), sync_on_commit=False, test_commands=True)
    uri = daemon.start()
    try:
        yield uri
    finally:
        daemon.stop()


@pytest.fixture(scope="session")
def test_settings(lake_uri: str) -> Settings:
    return Settings(mongodb_uri=lake_uri, database="kinflow_test", operation_timeout=20.0)


@pytest.fixture(scope="session")
async def mongo_client(
    lake_uri: str, test_settings: Settings
) -> AsyncIterator[AsyncMongoClient[dict[str, Any]]]:
    client = make_client(lake_uri, test_settings)
    yield client
    await client.close()


@pytest.fixture
async def lake(
    mongo_client: AsyncMongoClient[dict[str, Any]], test_settings: Settings
) -> AsyncIterator[Lake]:
    """A lake on a database of its own, dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    lake = Lake(
        mongo_client,
        name,
        default_dataset="production",
        operation_timeout=test_settings.operation_timeout,
        transaction_attempts=test_settings.transaction_attempts,
    )
    await lake.ensure_dataset()
    yield lake
    await mongo_client.drop_database(name)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "kinflow-data"
