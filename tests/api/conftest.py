"""API fixtures: the real app (lifespan, lake, hub, engine) on a fresh database per test.

Starlette's TestClient runs the app on an event loop of its own (in a
thread), so the app opens its own client to the session's embedded lake;
the test's database is dropped afterwards with a plain pymongo client.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient
from starlette.testclient import TestClient

from kinflow.http.app import create_app
from kinflow.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
TOKENS = ("view-token-for-tests=vera:viewer,op-token-for-tests=otto:operator,"
          "admin-token-for-tests=ada:admin")


@pytest.fixture
def database(lake_uri: str) -> Iterator[str]:
    name = f"api_{uuid.uuid4().hex[:12]}"
    yield name
    client: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    client.drop_database(name)
    client.close()


def make_settings(lake_uri: str, database: str, **overrides: Any) -> Settings:
    """Test apps run without the in-process worker, so tests see only their own calls.

    Starlette's TestClient addresses the app as ``testserver``: an allowed host here.
    """
    options: dict[str, Any] = {"worker": False, "allowed_hosts": ["testserver"], **overrides}
    return Settings(mongodb_uri=lake_uri, database=database, operation_timeout=20.0,
                    **options)  # fmt: skip


@pytest.fixture
def client(lake_uri: str, database: str) -> Iterator[TestClient]:
    """The app without tokens (open, as on 127.0.0.1)."""
    with TestClient(create_app(make_settings(lake_uri, database))) as test_client:
        yield test_client


@pytest.fixture
def secured(lake_uri: str, database: str) -> Iterator[TestClient]:
    """The app with viewer, operator and admin tokens configured."""
    settings = make_settings(lake_uri, database, api_tokens=TOKENS)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def gql(
    client: TestClient, query: str, variables: dict[str, Any] | None = None,
    token: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = client.post("/graphql", json={"query": query, "variables": variables or {}},
                           headers=headers)  # fmt: skip
    assert response.status_code < 500, response.text
    body: dict[str, Any] = response.json()
    return body


def data(body: dict[str, Any]) -> dict[str, Any]:
    assert not body.get("errors"), json.dumps(body["errors"], indent=1)
    result: dict[str, Any] = body["data"]
    return result


def error_code(body: dict[str, Any]) -> str:
    assert body.get("errors"), body
    code: str = body["errors"][0]["extensions"]["code"]
    return code


def canonical_definitions() -> list[dict[str, Any]]:
    """The canonical example (article review with a translation cohort)."""
    path = ROOT / "examples" / "definitions" / "article-review.json"
    if path.exists():
        loaded: list[dict[str, Any]] = json.loads(path.read_text())
        return loaded
    from tests.engine.definitions import ARTICLE_REVIEW, TRANSLATE_ARTICLE

    return [TRANSLATE_ARTICLE, ARTICLE_REVIEW]
