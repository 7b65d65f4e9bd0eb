"""Each error code the API returns, with extensions.code and extensions.details.

Codes the engine can only raise once spawning lands (spawn depth, fan-out)
are checked through the same shaping function every resolver error passes.
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from graphql import GraphQLError
from pymongo import MongoClient
from starlette.testclient import TestClient

from kinflow.core import errors as engine_errors
from kinflow.errors import KinflowError
from kinflow.http.app import create_app
from kinflow.schema.errors import shape_error
from tests.api.conftest import data, error_code, gql, make_settings
from tests.api.test_mutations import KITCHEN, deploy, fire, start
from tests.engine.definitions import ARTICLE_REVIEW, TRANSLATE_ARTICLE, simple

pytestmark = pytest.mark.lake


def test_every_kinflow_error_keeps_its_code_and_details() -> None:
    classes = [c for _, c in inspect.getmembers(engine_errors, inspect.isclass)
               if issubclass(c, KinflowError)]  # fmt: skip
    assert len(classes) > 15
    for cls in classes:
        shaped = shape_error(GraphQLError("x", original_error=cls("refused", limit=3)))
        assert shaped.message == "refused"
        assert shaped.extensions == {"code": cls.code, "details": {"limit": 3}}
    for code in ("spawn-depth-exceeded", "fan-out-limit", "concurrent-modification"):
        assert code in {c.code for c in classes}


def test_definition_errors(client: TestClient) -> None:
    unknown = gql(client, 'mutation { startInstance(definition: "nope") { changed } }')
    assert error_code(unknown) == "definition-not-found"
    bad = simple("Bad Name", [{"name": "a", "transitions": [{"name": "t", "to": "ghost"}]}],
                 initial="nope")  # fmt: skip
    invalid = deploy(client, bad)
    assert error_code(invalid) == "definition-invalid"
    assert len(invalid["errors"][0]["extensions"]["details"]["issues"]) >= 2

    parent = copy.deepcopy(ARTICLE_REVIEW)
    spawn = parent["stages"][1]["activities"][0]["actions"][0]["spawn"]
    spawn["with"] = {"source": spawn["with"]["source"], "colour": "'red'"}
    contracts = deploy(client, TRANSLATE_ARTICLE, parent)
    assert error_code(contracts) == "spawn-contracts-invalid"
    assert contracts["errors"][0]["extensions"]["details"]["issues"]


def test_instance_and_action_errors(client: TestClient) -> None:
    assert error_code(fire(client, "missing", "w", "go")) == "instance-not-found"
    data(deploy(client, KITCHEN))
    missing_title = gql(client, 'mutation { startInstance(definition: "kitchen") { changed } }')
    assert error_code(missing_title) == "required-field-not-provided"
    wrong = gql(client, """mutation { startInstance(definition: "kitchen",
        fields: {title: "t", n: "many"}) { changed } }""")  # fmt: skip
    assert error_code(wrong) == "initial-fields-invalid"
    iid = start(client)["instance"]["id"]
    params = fire(client, iid, "w", "needs")
    assert error_code(params) == "action-params-invalid"
    assert error_code(fire(client, iid, "x", "fin")) == "contract-violation"  # not in stage a
    other = start(client)["instance"]["id"]
    data(fire(client, other, "w", "go"))
    data(fire(client, other, "x", "fin"))
    disabled = fire(client, other, "x", "fin")
    assert error_code(disabled) == "action-disabled"
    assert disabled["errors"][0]["extensions"]["details"]["reason"] == "activity-not-active"
    data(fire(client, iid, "w", "bump", k="once"))
    reused = gql(client, """mutation($i: ID!) { abortInstance(instanceId: $i,
        idempotencyKey: "once") { changed } }""", {"i": iid})  # fmt: skip
    assert error_code(reused) == "contract-violation"


def test_cascade_limit(client: TestClient) -> None:
    ping_pong = simple("ping-pong", [
        {"name": "a", "activities": [{"name": "w", "actions": [{"name": "go", "status": "done"}]}],
         "transitions": [{"name": "to-b", "to": "b", "when": "true"}]},
        {"name": "b", "transitions": [{"name": "to-a", "to": "a", "when": "true"}]},
    ])  # fmt: skip
    data(deploy(client, ping_pong))
    started = gql(client, 'mutation { startInstance(definition: "ping-pong") { changed } }')
    assert error_code(started) == "cascade-limit"
    assert started["errors"][0]["extensions"]["details"]["limit"] > 0


@pytest.fixture
def fragile(lake_uri: str, database: str) -> Iterator[TestClient]:
    """An app that gives up on a transaction after two attempts."""
    settings = make_settings(lake_uri, database, transaction_attempts=2)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_concurrent_modification_after_bounded_retries(fragile: TestClient, lake_uri: str
                                                        ) -> None:
    data(deploy(fragile, KITCHEN))
    iid = start(fragile)["instance"]["id"]
    admin: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    admin.admin.command(
        "configureFailPoint", "failCommand", mode={"times": 10},
        data={"failCommands": ["commitTransaction"], "errorCode": 112,
              "errorLabels": ["TransientTransactionError"]},
    )  # fmt: skip
    try:
        refused = fire(fragile, iid, "w", "bump")
    finally:
        admin.admin.command("configureFailPoint", "failCommand", mode="off")
        admin.close()
    assert error_code(refused) == "concurrent-modification"


def test_unexpected_errors_are_masked_and_logged_with_an_id(
    client: TestClient, lake_uri: str, database: str, caplog: pytest.LogCaptureFixture
) -> None:
    raw: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    raw[database]["production"].insert_one({
        "_id": "broken", "_type": "kinflow.instance", "fields": [1, 2],
        "currentStage": "a", "definition": "d",
    })  # fmt: skip
    raw.close()
    with caplog.at_level(logging.ERROR, logger="kinflow.api"):
        body = gql(client, '{ instance(id: "broken") { id fields } }')
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "internal-error"
    error_id = error["extensions"]["errorId"]
    assert error_id in error["message"] and "int" not in error["message"]
    assert any(error_id in record.getMessage() for record in caplog.records)
    assert body["data"] == {"instance": None}
