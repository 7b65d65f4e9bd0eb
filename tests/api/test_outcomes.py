"""Outcomes through the API: rows' outcome, outputs and attempt; the cohort's failed count;
``childCompleted`` carrying them (HTTP and a websocket only)."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from kinflow.http.app import create_app
from tests.api.conftest import data, gql, make_settings
from tests.api.test_subscriptions import socket
from tests.engine.cohort_defs import items, parent
from tests.engine.outcome_defs import worker

pytestmark = pytest.mark.lake

ROW = "rowKey status stage outcome outputs outputsError attempt previousChildIds cancelling"
FIRE = """mutation($i: ID!, $x: String!, $p: JSON) {
  fireAction(instanceId: $i, activity: "task", action: $x, params: $p) { changed } }"""
COHORT = f"""query($p: ID!) {{ cohort(parentId: $p, activity: "translate") {{
  total active done aborted failed settled rows {{ {ROW} }} }} }}"""


def cohort_of_three(client: TestClient) -> tuple[str, dict[str, str]]:
    data(gql(client, "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }",
             {"d": [parent(), worker()]}))  # fmt: skip
    started = data(gql(client, """mutation($f: JSON) { startInstance(definition: "p",
        fields: $f) { instance { id } } }""", {"f": items("a", "b", "c")}))  # fmt: skip
    parent_id: str = started["startInstance"]["instance"]["id"]
    data(gql(client, """mutation($i: ID!) { fireAction(instanceId: $i, activity: "go",
        action: "go") { changed } }""", {"i": parent_id}))  # fmt: skip
    rows = data(gql(client, """query($i: ID!) { instance(id: $i) { subworkflows {
        rowKey childId } } }""", {"i": parent_id}))["instance"]["subworkflows"]  # fmt: skip
    return parent_id, {r["rowKey"]: r["childId"] for r in rows}


def test_rows_carry_outcome_outputs_and_attempt_and_the_cohort_counts_failures(
        client: TestClient) -> None:
    parent_id, children = cohort_of_three(client)
    live = data(gql(client, COHORT, {"p": parent_id}))["cohort"]
    assert {(r["outcome"], r["outputs"], r["attempt"], r["cancelling"]) for r in live["rows"]} \
        == {(None, None, 1, False)}
    assert live["failed"] == 0
    with socket(client) as ws:
        ws.subscribe(f'subscription($p: ID!) {{ childCompleted(parentId: $p) {{ kind row {{ '
                     f'{ROW} }} }} }}', {"p": parent_id})
        ws.wait_registered(1)
        data(gql(client, FIRE, {"i": children["a"], "x": "finish", "p": {"words": 12}}))
        data(gql(client, FIRE, {"i": children["b"], "x": "give-up"}))
        data(gql(client, """mutation($i: ID!) { abortInstance(instanceId: $i) { changed } }""",
                 {"i": children["c"]}))
        events = {e["row"]["rowKey"]: e for e in
                  (ws.next()["data"]["childCompleted"] for _ in children)}
    assert {k: (e["kind"], e["row"]["status"], e["row"]["outcome"])
            for k, e in events.items()} == {
        "a": ("completed", "DONE", "succeeded"), "b": ("completed", "DONE", "failed"),
        "c": ("aborted", "ABORTED", "aborted")}
    assert events["a"]["row"]["outputs"] == {"wordCount": 12, "item": "a"}
    assert events["c"]["row"]["outputs"] is None

    final: dict[str, Any] = data(gql(client, COHORT, {"p": parent_id}))["cohort"]
    assert (final["total"], final["active"], final["done"], final["aborted"],
            final["failed"], final["settled"]) == (3, 0, 2, 1, 2, True)
    rows = {r["rowKey"]: r for r in final["rows"]}
    assert rows["b"]["outputs"] == {"wordCount": 7, "item": "b"}
    assert rows["b"]["stage"] == "gave-up" and rows["b"]["outputsError"] is None
    assert all(r["attempt"] == 1 and r["previousChildIds"] == [] and not r["cancelling"]
               for r in rows.values())


def test_the_row_output_cap_is_a_setting(lake_uri: str, database: str) -> None:
    settings = make_settings(lake_uri, database, max_row_output_bytes=40)
    with TestClient(create_app(settings)) as client:
        parent_id, children = cohort_of_three(client)
        data(gql(client, FIRE, {"i": children["a"], "x": "finish", "p": {"words": 1}}))
        data(gql(client, FIRE, {"i": children["b"], "x": "finish",
                                "p": {"words": 123456789012345678}}))  # 42 bytes of outputs
        rows = {r["rowKey"]: r for r in
                data(gql(client, COHORT, {"p": parent_id}))["cohort"]["rows"]}
    assert rows["a"]["outputs"] == {"wordCount": 1, "item": "a"}
    assert rows["b"]["outputs"] is None and rows["b"]["outputsError"] == "output-too-large"
    assert rows["b"]["outcome"] == "succeeded"
