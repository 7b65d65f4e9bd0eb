"""Starting the API on a lake the first version wrote moves its leases out."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import MongoClient
from starlette.testclient import TestClient

from kinflow.http.app import create_app
from tests.api.conftest import data, gql, make_settings

pytestmark = pytest.mark.lake


def test_the_api_starts_with_no_lease_left_in_the_content_dataset(lake_uri: str,
                                                                   database: str) -> None:
    mongo: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    try:
        content = mongo[database]["production"]
        content.insert_many([
            {"_id": "article-1", "_type": "article"},
            *({"_id": f"lease.tick.instance.{n}", "_type": "kinflow.lease", "holder": "old",
               "expiresAt": "2999-01-01T00:00:00.000Z"} for n in range(3)),
        ])
        with TestClient(create_app(make_settings(lake_uri, database))) as client:
            counted = data(gql(client, '{ groq(query: "count(*)") }'))["groq"]
        assert counted == 1  # the article: leases are not content
        assert content.count_documents({"_type": "kinflow.lease"}) == 0
        assert mongo[database]["production.engine"].count_documents(
            {"_type": "kinflow.lease"}) == 3
    finally:
        mongo.close()
